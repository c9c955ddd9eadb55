"""What is no bug in opsaudit is not reported as one (exit 5): a data directory this user may not
read (every command says so, exit 6, nor "corrupt", whose advice to move the state away would
start a new dataset), Ctrl-C during a query (130).

The commands run as a child process without the capabilities that let root read any file
(`setpriv`), or as they are when the tests do not run as root."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_sync

ROOT = Path(__file__).resolve().parents[2]
DENIED = ": run as the user that owns it, or give this one access"
DROP = "-dac_override,-dac_read_search"


def _as_a_user(*args: str, key: str = "unused") -> subprocess.CompletedProcess[str]:
    """`python -m exporter ARGS` as a user that file modes apply to (root without the
    override capabilities)."""
    return _python_as_a_user("-m", "exporter", *args, key=key)


def _python_as_a_user(
    *args: str, key: str = "unused", drop: str = DROP
) -> subprocess.CompletedProcess[str]:
    prefix = (
        ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"] if os.geteuid() == 0 else []
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEON_API_KEY": key}
    return subprocess.run(
        [*prefix, sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def synced(make_sim: Any, tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    assert run_sync(make_sim(seed=5, projects=1), data).outcome == "ok"
    yield data
    data.chmod(0o755)  # (pytest removes it)
    (data / "state.sqlite").chmod(0o644)


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["check"],
        ["report"],
        ["query", "SELECT count(*) FROM operations"],
        ["compact"],
        ["discard-events", "--sink", "webhook"],
    ],
)
def test_an_unreadable_data_dir_is_said_so_by_every_command(
    synced: Path, command: list[str]
) -> None:
    synced.chmod(0)
    done = _as_a_user(*command, "--data-dir", str(synced))
    assert (done.returncode, done.stdout) == (6, "")
    assert done.stderr == f"Error: permission denied: {synced / 'state.sqlite'}{DENIED}\n"


def test_a_state_file_of_another_user_is_not_called_corrupt(synced: Path) -> None:
    (synced / "state.sqlite").chmod(0)
    done = _as_a_user("status", "--data-dir", str(synced))
    assert (done.returncode, done.stderr) == (
        6,
        f"Error: permission denied: {synced / 'state.sqlite'}{DENIED}\n",
    )


def test_doctor_finds_an_unreadable_data_dir(synced: Path) -> None:
    synced.chmod(0)
    done = _as_a_user("doctor", "--data-dir", str(synced), "--base-url", "http://127.0.0.1:9/")
    assert done.returncode == 8
    assert f"error data_dir: permission denied: {synced}{DENIED}" in done.stdout.splitlines()


def _sync_as_a_user(sim: Any, data: Path, **kwargs: str) -> subprocess.CompletedProcess[str]:
    args = ("sync", "--data-dir", str(data), "--base-url", sim.base_url, "--max-rps", "0")
    return _python_as_a_user("-m", "exporter", *args, key=sim.personal_key, **kwargs)


def _views_warnings(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The sync's warnings about opsaudit.duckdb, without their time stamp."""
    lines = [line.split(" ", 1)[1] for line in done.stderr.splitlines() if " WARNING " in line]
    return [line for line in lines if "opsaudit.duckdb" in line]


def _views_out_of_date(data: Path) -> None:
    """As after a run that committed: the next sync writes opsaudit.duckdb again."""
    import sqlite3

    con = sqlite3.connect(data / "state.sqlite")
    with con:
        con.execute("UPDATE meta SET value = 'x' WHERE key = 'views_database_key'")
    con.close()


def test_a_views_database_another_user_owns_is_named_with_the_fix(
    make_sim: Any, synced: Path
) -> None:
    """opsaudit.duckdb of another user in a shared (sticky, like /tmp) directory cannot be
    replaced: the warning was "could not refresh opsaudit.duckdb: [Errno 1] Operation not
    permitted: '.../.opsaudit.duckdb.<hex>.tmp' -> '.../opsaudit.duckdb'" (a temporary named,
    no fix); it is every command's permission-denied, naming the file."""
    _views_out_of_date(synced)
    views = synced / "opsaudit.duckdb"
    os.chown(views, 65534, 65534)
    os.chown(synced, 65534, 65534)
    synced.chmod(0o1777)
    try:
        # Without CAP_FOWNER too: root may remove any file of a sticky directory.
        done = _sync_as_a_user(make_sim(seed=5, projects=1), synced, drop=f"{DROP},-fowner")
    finally:
        os.chown(synced, 0, 0)
    assert (done.returncode, _views_warnings(done)) == (
        0,
        [
            f"WARNING opsaudit.storage: could not refresh opsaudit.duckdb: permission denied: {views}{DENIED}"
        ],
    )


def test_a_data_file_the_views_may_not_read_is_named_with_the_fix(
    make_sim: Any, synced: Path
) -> None:
    """DuckDB's own error ("loading 90_report.sql: IO Error: Cannot open file "...": Permission
    denied") is said as every command says a permission refused."""
    _views_out_of_date(synced)
    flagged = next(synced.glob("flagged/part-2*.parquet"))
    flagged.chmod(0)
    done = _sync_as_a_user(make_sim(seed=5, projects=1), synced)
    assert (done.returncode, _views_warnings(done)) == (
        0,
        [
            f"WARNING opsaudit.storage: could not refresh opsaudit.duckdb: permission denied: {flagged}{DENIED}"
        ],
    )


@pytest.mark.parametrize("mode", [0o333, 0o555, 0], ids=["0333", "0555", "0000"])
def test_sync_says_permission_denied_as_every_command_does(
    make_sim: Any, tmp_path: Path, mode: int
) -> None:
    """A new data directory this user may write but not list (0333) was "cannot create the
    state file ...: Permission denied; free some space or fix the mount" (after renaming the
    state file in: opening the directory to make that durable needs read permission); one it
    may not write, "cannot write to data directory ...: Permission denied; sync, compact and
    discard-events need a writable directory": every other command's words, nothing made."""
    sim = make_sim(seed=5, projects=1)
    data = tmp_path / "data"
    data.mkdir(mode)
    try:
        done = _sync_as_a_user(sim, data)
        made = sorted(p.name for p in data.iterdir())
    finally:
        data.chmod(0o755)
    assert (done.returncode, done.stdout) == (6, "")
    assert done.stderr.splitlines()[-1] == f"Error: permission denied: {data}{DENIED}"
    assert (made, sim.stats()["requests"]) == ([], 0)


def test_sync_refuses_a_dataset_it_may_not_list_as_doctor_finds_it(
    make_sim: Any, synced: Path
) -> None:
    """An existing dataset in a directory this user may write but not read (0333): the sync
    exited 0 but warned that opsaudit.duckdb "could not be refreshed: Permission denied" (the
    new file was renamed in, its directory could not be opened to make that durable, so every
    run wrote it again) while `doctor` said "error data_dir: permission denied", exit 8."""
    sim = make_sim(seed=5, projects=1)
    runs = _run_count(synced)
    synced.chmod(0o333)
    done = _sync_as_a_user(sim, synced)
    doctor = _as_a_user("doctor", "--data-dir", str(synced), "--base-url", "http://127.0.0.1:9/")
    assert (done.returncode, done.stdout) == (6, "")
    assert done.stderr.splitlines()[-1] == f"Error: permission denied: {synced}{DENIED}"
    assert doctor.returncode == 8
    assert f"error data_dir: permission denied: {synced}{DENIED}" in doctor.stdout.splitlines()
    synced.chmod(0o755)
    assert (_run_count(synced), sim.stats()["requests"]) == (runs, 0)


def _run_count(data: Path) -> int:
    import sqlite3

    con = sqlite3.connect(data / "state.sqlite")
    try:
        return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        con.close()


def test_a_state_file_that_cannot_be_created_gets_the_advice_for_its_cause(
    tmp_path: Path,
) -> None:
    """Every OSError making the state file was told "free some space or fix the mount":
    a directory this user may not read (the rename in is made durable by opening it) too."""
    data = tmp_path / "data"
    data.mkdir(0o333)
    code = (
        "import sys; from pathlib import Path; from exporter.store.state import StateDB\n"
        "try:\n    StateDB(Path(sys.argv[1]))\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)"
    )
    try:
        done = _python_as_a_user("-c", code, str(data / "state.sqlite"))
    finally:
        data.chmod(0o755)
    assert (done.stdout, done.stderr) == (
        f"AccessDeniedError permission denied: {data}{DENIED}\n",
        "",
    )


@pytest.mark.parametrize("fmt", ["csv", "markdown"])  # written as read; written whole
@pytest.mark.parametrize(
    "dir_mode",
    [0o555, 0o333],  # no file can be created in it; one can, but it cannot be listed
    ids=["0555", "0333"],
)
def test_output_file_this_user_may_write_is_written_whatever_its_directory_allows(
    synced: Path, tmp_path: Path, dir_mode: int, fmt: str
) -> None:
    """`-o FILE` written aside and renamed over the old file (whole or not at all) refused a
    file this user may write in a directory it may not create a file in (a report under
    /var/log: "cannot write -o FILE: Permission denied", exit 2; written in place before), and
    said so of one it had replaced (0333: the rename was made, the directory could not be
    opened to make it durable). Where nothing can be put beside it, it is written in place,
    as a shell's `>` writes it (and as before)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "report.txt"
    out.write_text("the previous report\n")
    out.chmod(0o666)
    out_dir.chmod(dir_mode)
    query = ("query", "--data-dir", str(synced), "--format", fmt, "SELECT id FROM operations")
    try:
        done = _as_a_user(*query, "-o", str(out))
    finally:
        out_dir.chmod(0o755)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    shown = _as_a_user(*query)
    assert (shown.returncode, out.read_text()) == (0, shown.stdout)
    assert [p.name for p in out_dir.iterdir()] == ["report.txt"]
    assert out.stat().st_mode & 0o777 == 0o666


def test_ctrl_c_during_a_query_is_an_interruption_not_a_bug(synced: Path) -> None:
    """DuckDB answers Ctrl-C with its own error ("Query interrupted"), not KeyboardInterrupt:
    it was reported as a bug in opsaudit, exit 5."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    slow = "SELECT sum(hash(range)) FROM range(100000000000)"
    query = subprocess.Popen(
        [sys.executable, "-m", "exporter", "query", "--data-dir", str(synced), slow],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Well into the scan: over 1.5 s of CPU (start-up is a few tenths), however busy the box.
        ticks = os.sysconf("SC_CLK_TCK")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            fields = Path(f"/proc/{query.pid}/stat").read_text().rsplit(")", 1)[1].split()
            if (int(fields[11]) + int(fields[12])) / ticks > 1.5:
                break
            time.sleep(0.1)
        query.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = query.communicate(timeout=20)
        stopped = time.monotonic() - signalled
    finally:
        query.kill()  # (a query left running would scan for minutes)
        query.wait()
    assert (query.returncode, out, err) == (130, "", "Interrupted.\n")
    assert stopped < 5, f"{stopped:.1f}s from Ctrl-C to the exit"


def test_each_os_error_writing_the_data_dir_gets_its_own_fix() -> None:
    """One helper words them all (the sync's probe and the state file said "free some space
    or fix the mount" of a permission, or one text for every cause)."""
    import errno

    from exporter.core.errors import AccessDeniedError, os_storage_error

    def error(code: int, filename: str) -> Exception:
        return os_storage_error(
            Path("data"), OSError(code, os.strerror(code), filename), "cannot write to"
        )

    denied = error(errno.EACCES, "data/_staging/.probe-1")
    assert (type(denied), str(denied)) == (AccessDeniedError, f"permission denied: data{DENIED}")
    # A directory above it refused (`mkdir -p`): that one is named, the one to fix.
    above = os_storage_error(Path("/srv/a/data"), OSError(errno.EPERM, "x", "/srv/a"), "")
    assert str(above) == f"permission denied: /srv/a{DENIED}"
    assert str(error(errno.ENOSPC, "data/x")) == (
        "cannot write to data: No space left on device; free some space, then run again"
    )
    assert str(error(errno.EROFS, "data/x")) == (
        "cannot write to data: Read-only file system; sync, compact and discard-events need a "
        "writable directory (query, report, status and check only read it): mount it "
        "read-write, or choose another --data-dir"
    )
    assert str(error(errno.EIO, "data/x")) == "cannot write to data: Input/output error"
