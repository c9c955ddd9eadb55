"""`opsaudit doctor` against the simulator: a good key, a revoked key, other key kinds, a
read-only data directory, one that cannot be created, a held lock, TLS and connection errors."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import http.server
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.store.state import FORMAT_VERSION

from .conftest import at_us, invoke, run_sync, state_rows

# A state file that this opsaudit wrote is of its own format.
STATE_OK = f"ok    state: state format {FORMAT_VERSION} (this opsaudit reads {FORMAT_VERSION})"


@pytest.fixture
def sim(make_sim: Any) -> Any:
    return make_sim(seed=21, projects=3, shared_projects=1, orgs=2, ops_per_project_per_day=50)


def doctor(sim: Any, data_dir: Path, key: str, *args: str, url: str | None = None) -> Any:
    return invoke(
        "doctor",
        "--data-dir",
        str(data_dir),
        "--base-url",
        url or sim.base_url,
        *args,
        env={"NEON_API_KEY": key},
    )


def offline_doctor(data_dir: Path) -> Any:
    """doctor without a key, its API refusing at once: the data directory's checks alone."""
    return invoke(
        "doctor",
        "--data-dir",
        str(data_dir),
        "--base-url",
        "http://127.0.0.1:9/api/v2",
    )  # NEON_API_KEY unset (tests/conftest.py): set but empty says so (test_empty_environment)


def lines_without_disk(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    disk = [line for line in lines if line.startswith(("ok    disk: ", "warn  disk: "))]
    assert len(disk) == 1 and " GiB free in " in disk[0], lines
    return [line for line in lines if line not in disk]


def test_all_is_well(sim: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    [(finished,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    orgs = ", ".join(f"{o['name']} ({o['id']})" for o in sim.world.orgs)
    [(versions,)] = state_rows(
        data_dir,
        "SELECT sum(rows) FROM files WHERE state = 'live' AND path LIKE 'operation_versions/%'",
    )
    [(live,)] = state_rows(data_dir, "SELECT count(*) FROM files WHERE state = 'live'")
    result = doctor(sim, data_dir, sim.personal_key)
    assert result.exit_code == 0, result.output
    assert lines_without_disk(result.stdout) == [
        f"ok    base_url: {sim.base_url}/ (plain http on loopback)",
        f"ok    key: a personal key; it sees 2 organization(s): {orgs}",
        "ok    discovery: 4 project(s) in scope",
        f"ok    data_dir: {data_dir} is writable and locks work",
        "ok    lock: free",
        STATE_OK,
        f"ok    runs: last run {at_us(finished).isoformat().replace('+00:00', 'Z')}: ok; "
        "1 successful run(s) in all",
        f"ok    files: {live} committed file(s) and the tables are Parquet",
        f"ok    views: opsaudit.duckdb answers ({versions:,} operation versions)",
    ]
    assert sim.personal_key not in result.output
    assert [p.name for p in data_dir.iterdir() if p.name.startswith(".opsaudit-doctor")] == []


def test_revoked_key(sim: Any, tmp_path: Path) -> None:
    key = sim.personal_key
    sim.revoke_key(key)
    result = doctor(sim, tmp_path, key)
    assert result.exit_code == 8
    assert lines_without_disk(result.stdout) == [
        f"ok    base_url: {sim.base_url}/ (plain http on loopback)",
        "error key: the key was rejected (401: invalid, revoked or expired) Fix: create a new "
        "key in the console and update NEON_API_KEY or --api-key-file",
        f"ok    data_dir: {tmp_path} is writable and locks work",
        "ok    lock: free (no sync has taken it yet)",
        "ok    state: no state yet (a new dataset)",
        "warn  runs: no sync has run yet Fix: run `opsaudit sync`",
    ]
    assert key not in result.output


def test_organization_and_project_keys(sim: Any, tmp_path: Path) -> None:
    org = sim.org_ids[0]
    in_org = sim.project_ids(org)
    result = doctor(sim, tmp_path, sim.org_key(org))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:3] == [
        f"ok    key: an organization key; it sees {len(in_org)} project(s) in organization {org}",
        f"ok    discovery: {len(in_org)} project(s) in scope",
    ]
    project = doctor(sim, tmp_path, sim.project_key(in_org[0]))
    assert project.stdout.splitlines()[1] == (
        "ok    key: a project-scoped key (or an organization key of a one-project "
        f"organization); it sees 1 project(s) in organization {org}"
    )


def test_a_transient_failure_is_not_advice_about_the_key(sim: Any, tmp_path: Path) -> None:
    """Issue 19: one 500 on /users/me/organizations told a personal key to "use a personal or
    organization key". A failure that passes is retried; one that persists is named transient."""
    orgs = ", ".join(f"{o['name']} ({o['id']})" for o in sim.world.orgs)
    sim.fail_requests("/users/me/organizations", 500, times=1)
    once = doctor(sim, tmp_path, sim.personal_key)
    assert once.exit_code == 0, once.output
    assert once.stdout.splitlines()[1:3] == [
        f"ok    key: a personal key; it sees 2 organization(s): {orgs}",
        "ok    discovery: 4 project(s) in scope",
    ]
    sim.fail_requests("/users/me/organizations", 503)
    always = doctor(sim, tmp_path, sim.personal_key)
    sim.clear_failures()
    assert always.exit_code == 8
    assert always.stdout.splitlines()[1] == (
        "error api: GET /users/me/organizations answered 503 3 times: a transient failure of "
        "the service or a proxy, not a problem of the key Fix: run `opsaudit doctor` again in "
        "a few minutes; if it persists, check the platform's status page or the proxy"
    )
    assert "personal or organization key" not in always.output
    # An organization key's fallback listing: the same.
    org = sim.org_ids[0]
    sim.fail_requests("/projects", 502)
    listing = doctor(sim, tmp_path, sim.org_key(org))
    sim.clear_failures()
    assert listing.exit_code == 8
    assert listing.stdout.splitlines()[1].startswith(
        "error api: GET /projects answered 502 3 times: a transient failure of the service "
    )


def test_missing_and_malformed_key_files(sim: Any, tmp_path: Path) -> None:
    result = invoke(
        "doctor",
        "--data-dir",
        str(tmp_path),
        "--base-url",
        sim.base_url,
        "--api-key-file",
        str(tmp_path / "nokey"),
    )
    assert result.exit_code == 8
    assert result.stdout.splitlines()[1] == (
        f"error key: cannot read --api-key-file {tmp_path / 'nokey'}: No such file or directory "
        "Fix: make the key file readable by this user"
    )
    bad = doctor(sim, tmp_path, "two words")
    assert bad.exit_code == 8
    assert bad.stdout.splitlines()[1] == (
        "error key: the API key is malformed (it contains a space, a line break, a control or a "
        "non-ASCII character) Fix: create or copy the key again (check the key file for a stray "
        "newline or a copy-paste accident)"
    )
    assert "two words" not in bad.output


def test_no_key_says_the_fix_once(tmp_path: Path) -> None:
    result = offline_doctor(tmp_path)
    assert result.exit_code == 8
    assert result.stdout.splitlines()[1] == (
        "error key: no API key Fix: set NEON_API_KEY or pass --api-key-file (create one in the "
        "console under account or organization settings)"
    )


@pytest.fixture
def read_only_copy(sim: Any, tmp_path: Path) -> Iterator[Path]:
    """A synced data directory seen through a read-only mount (EROFS: what a read-only disk or
    a restored backup mounted ro gives; chmod would not stop root, which the tests run as)."""
    source = tmp_path / "data"
    assert run_sync(sim, source).outcome == "ok"
    if os.geteuid() != 0:
        source.chmod(0o555)
        yield source
        source.chmod(0o755)
        return
    target = tmp_path / "ro"
    target.mkdir()
    bind = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"running as root where mount is not permitted: {bind.stderr!r}")
    try:
        ro = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(target)], capture_output=True, check=False
        )
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr!r}")
        yield target
    finally:
        gc.collect()
        held = _open_files_under(target)  # before unmounting: nothing may keep it busy
        subprocess.run(["umount", "--lazy", str(target)], check=True)
        assert held == [], held


def _open_files_under(directory: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used
            continue
        if path.startswith(str(directory)):
            out.append(path)
    return out


def test_read_only_data_dir(sim: Any, read_only_copy: Path) -> None:
    result = doctor(sim, read_only_copy, sim.personal_key)
    assert result.exit_code == 8
    reason = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
    lines = lines_without_disk(result.stdout)
    assert lines[3] == (
        f"error data_dir: {read_only_copy} is not writable ({reason}) Fix: make it writable "
        "by this user (or mount it read-write), or choose another --data-dir"
    )
    # The state is still readable (read-only, without its -shm file).
    assert lines[5] == STATE_OK


def test_data_dir_that_cannot_be_created(sim: Any, tmp_path: Path) -> None:
    # Whoever runs it (root too): a path below a regular file can never be a directory. A
    # usage error, as for every command (it was a finding, exit 8; sync said exit 6).
    (tmp_path / "file").write_text("x")
    result = doctor(sim, tmp_path / "file" / "data", sim.personal_key)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith(
        f"(env var: 'OPSAUDIT_DATA_DIR'): {tmp_path / 'file' / 'data'}: {tmp_path / 'file'} is a "
        "file, not a directory; point --data-dir (or $OPSAUDIT_DATA_DIR) at a directory, or at "
        "a path a sync can create\n"
    )


def test_lock_held_by_a_running_sync(sim: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    fd = os.open(data_dir / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, b"4242\n")
        result = doctor(sim, data_dir, sim.personal_key)
    finally:
        os.close(fd)
    assert result.exit_code == 0, result.output  # a warning, not an error
    assert (
        "warn  lock: held: a sync or compaction is running now (pid 4242) Fix: nothing to "
        "do unless it never ends (the lock goes with the process)" in result.stdout.splitlines()
    )


def test_tls_and_connection_errors(sim: Any, tmp_path: Path) -> None:
    https = sim.base_url.replace("http://", "https://")
    result = doctor(sim, tmp_path, sim.personal_key, url=https)
    assert result.exit_code == 8
    assert result.stdout.splitlines()[1].startswith("error tls: TLS handshake failed (")
    closed = doctor(sim, tmp_path, sim.personal_key, url="http://127.0.0.1:1/api/v2/")
    assert closed.exit_code == 8
    assert closed.stdout.splitlines()[1].startswith(
        "error base_url: cannot connect to http://127.0.0.1:1/api/v2/ (ConnectError: "
    )


def test_a_base_url_with_a_bad_port_is_a_finding(sim: Any, tmp_path: Path) -> None:
    """It was an InvalidURL out of httpx: exit 5, "a bug in opsaudit"."""
    result = doctor(sim, tmp_path, sim.personal_key, url="http://host:abc/api/v2/")
    assert result.exit_code == 8
    assert result.stdout.splitlines()[0] == (
        "error base_url: --base-url 'http://host:abc/api/v2/' has no usable port (a number from "
        "1 to 65535 after the host's colon); expected something like "
        "https://console.neon.tech/api/v2/ Fix: pass --base-url (or $OPSAUDIT_BASE_URL)"
    )


def test_json_output(sim: Any, tmp_path: Path) -> None:
    import json

    result = doctor(sim, tmp_path, sim.personal_key, "--format", "json")
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert [f["check"] for f in report["findings"]] == [
        "base_url",
        "key",
        "discovery",
        "data_dir",
        "lock",
        "disk",
        "state",
        "runs",
    ]
    assert report["findings"][-1] == {
        "check": "runs",
        "level": "warn",
        "message": "no sync has run yet",
        "remedy": "run `opsaudit sync`",
    }


def test_views_file_is_checked_as_a_duckdb_shell_sees_it(tmp_path: Path) -> None:
    from exporter.analytics.views import write_views_database

    from .conftest import analytics_dataset

    data_dir = analytics_dataset(tmp_path / "data")
    write_views_database(data_dir)
    moved = tmp_path / "restored"
    data_dir.rename(moved)  # a restored backup: the views still answer

    def views_line() -> str:
        result = offline_doctor(moved)
        return next(line for line in result.stdout.splitlines() if " views: " in line)

    assert views_line() == "ok    views: opsaudit.duckdb answers (15 operation versions)"
    gone = sorted(moved.glob("operation_versions/*/*.parquet"))[0]
    gone.unlink()  # a file its views name is missing
    relative = gone.relative_to(moved).as_posix()
    assert views_line() == (
        "warn  views: opsaudit.duckdb does not answer: IO Error: No files found that match the "
        f'pattern "{relative}" Fix: run `opsaudit sync` (it rewrites the file); meanwhile use '
        "`opsaudit query`"
    )


def test_views_answer_from_a_data_dir_whose_path_has_a_quote(tmp_path: Path) -> None:
    from exporter.analytics.views import write_views_database

    from .conftest import analytics_dataset

    data_dir = analytics_dataset(tmp_path / "it's data")
    write_views_database(data_dir)
    result = offline_doctor(data_dir)
    views = [line for line in result.stdout.splitlines() if " views: " in line]
    assert views == ["ok    views: opsaudit.duckdb answers (15 operation versions)"]


@contextlib.contextmanager
def answering(content_type: str, body: bytes) -> Iterator[str]:
    """A loopback HTTP server answering every GET with 200 and `body`; its URL as a base URL."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/v2/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_is_not_the_api_is_a_base_url_finding(tmp_path: Path) -> None:
    """Another server answering 200 to any path (a web page, a proxy's): doctor said `ok key: a
    personal key; it sees 0 organization(s)`, then advised --org-id for the discovery that
    failed on its body (found by a new user's hour)."""
    with answering("text/html", b"<html><body>Welcome</body></html>") as url:
        result = invoke(
            "doctor", "--data-dir", str(tmp_path), "--base-url", url, env={"NEON_API_KEY": "k"}
        )
    assert result.exit_code == 8
    assert result.stdout.splitlines()[:2] == [
        f"ok    base_url: {url} (plain http on loopback)",
        f"error base_url: {url} answered GET users/me/organizations with 200 but not the "
        "management API's JSON (text/html): it is not the platform's API Fix: pass the API's "
        "address as --base-url (the default: https://console.neon.tech/api/v2/)",
    ]
    assert not any(
        line.startswith(("ok    key", "error discovery")) for line in result.stdout.splitlines()
    )


def test_a_json_answer_without_the_organizations_list_is_not_a_base_url_finding(
    tmp_path: Path,
) -> None:
    """The API rarely answers 200 without the key it should carry (PRODUCT.md; a sync retries
    it): that is no sign of another server (a review found the first version of the check
    above calling it one)."""
    with answering("application/json", b"{}") as url:
        result = invoke(
            "doctor", "--data-dir", str(tmp_path), "--base-url", url, env={"NEON_API_KEY": "k"}
        )
    assert result.stdout.splitlines()[1] == "ok    key: a personal key; it sees 0 organization(s)"
    assert not any(line.startswith("error base_url") for line in result.stdout.splitlines())


def test_the_apis_root_without_its_path_is_named_not_the_key(sim: Any, tmp_path: Path) -> None:
    """Both listings answer 404 there, for any key: the key was blamed ("use a personal or
    organization key")."""
    root = sim.base_url.removesuffix("/api/v2")
    result = doctor(sim, tmp_path / "data", sim.personal_key, url=root)
    assert result.exit_code == 8
    assert lines_without_disk(result.stdout)[1] == (
        f"error base_url: {root}/ answers 404 to the organizations and projects listings: it "
        "is not the management API Fix: use its URL, ending in /api/v2 "
        "(https://console.neon.tech/api/v2/)"
    )


def test_a_host_clock_far_from_the_apis_is_an_error(sim: Any, tmp_path: Path) -> None:
    """What counts as recent compares the API's times with this host's clock: 20 minutes
    apart, a finished operation's change made in place was missed for good (exit 0). `doctor`
    and `sync` say so, from the API's Date header; `doctor` exits 8 (it said warn, exit 0: a
    `doctor &&` gate passed the set-up)."""
    from exporter.simulator import Faults

    sim.faults = Faults(clock_skew_seconds=-1200)  # the API 20 minutes behind
    result = doctor(sim, tmp_path, sim.personal_key)
    assert result.exit_code == 8
    [clock] = [line for line in result.stdout.splitlines() if line.startswith("error clock: ")]
    assert re.fullmatch(
        r"error clock: this host's clock is 20m0[01]s ahead of the API's \(its Date header\): "
        r"recent changes are judged by this host's clock, so an operation's change made in "
        r"place or an idle project's new operations may be missed Fix: set this host's clock "
        r"\(NTP: timedatectl set-ntp true\)",
        clock,
    ), clock
    # A run that lists the projects, and one given ids (no listing: said after its walks).
    for scope in ([], ["--project", sim.project_ids()[0]]):
        synced = invoke(
            "sync",
            "--data-dir",
            str(tmp_path / "d"),
            "--base-url",
            sim.base_url,
            "--max-rps",
            "0",
            *scope,
            env={"NEON_API_KEY": sim.personal_key},
        )
        assert synced.exit_code == 0, synced.output
        assert re.search(
            r"this host's clock is 20m0[01]s ahead of the API's .*; set the clock \(NTP\)",
            synced.stderr,
        ), scope
    sim.faults = Faults(clock_skew_seconds=30)  # within the minute allowed: nothing said
    result = doctor(sim, tmp_path, sim.personal_key)
    assert [line for line in result.stdout.splitlines() if "clock:" in line] == []


def test_an_organization_listing_refused_is_an_error(sim: Any, tmp_path: Path) -> None:
    """One organization's listing refused: a sync would be partial and that organization's
    projects never synced. `doctor` said warn and exited 0 (a `doctor &&` gate passed it)."""
    org = sim.org_ids[0]
    sim.fail_requests(f"/projects?org_id={org}", 403)
    result = doctor(sim, tmp_path, sim.personal_key)
    sim.clear_failures()
    assert result.exit_code == 8
    [line] = [
        s
        for s in result.stdout.splitlines()
        if s.startswith(("warn  discovery", "error discovery"))
    ]
    assert line.startswith("error discovery: ") and line.endswith(
        "Fix: a sync would be partial (exit 1): check the key's access"
    ), line
    assert "some listings failed" in line and org in line


def test_a_views_file_naming_older_files_is_a_warning(sim: Any, tmp_path: Path) -> None:
    """A sync that finds `opsaudit.duckdb` open in another program leaves it naming the files
    of before (exit 0, a warning on stderr); `doctor` called it ok ("answers (470 operation
    versions)") while the dataset held 520 and the DuckDB CLI read the older trail. A sync or
    compact killed between its commit and the file's rewrite leaves the same file, no program
    holding it: the warning named only the held-open cause and sent the user to close programs
    first (a `compact` SIGTERM'd 0.3 s in did)."""
    import shutil

    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    older = tmp_path / "older.duckdb"
    shutil.copy(data_dir / "opsaudit.duckdb", older)
    sim.advance(3600)
    assert run_sync(sim, data_dir).outcome == "ok"
    assert (
        doctor(sim, data_dir, sim.personal_key).stdout.splitlines()[-1].startswith("ok    views: ")
    )
    shutil.copy(older, data_dir / "opsaudit.duckdb")  # what the held-open file kept
    [(new_files,)] = state_rows(
        data_dir,
        "SELECT count(*) FROM files WHERE state = 'live' AND (path LIKE 'operation_versions/%' "
        "OR path LIKE 'superseded/%') AND run_id = (SELECT max(run_id) FROM runs)",
    )
    result = doctor(sim, data_dir, sim.personal_key)
    [views] = [line for line in result.stdout.splitlines() if " views: " in line]
    assert re.fullmatch(
        rf"warn  views: opsaudit\.duckdb answers \([\d,]+ operation versions\) but does not "
        rf"name {new_files} file\(s\) the dataset has \(a sync or compact that found it open "
        r"in another program, or was stopped before it rewrote it, left it behind\): the "
        r"DuckDB CLI reads an older trail Fix: run `opsaudit sync` \(it rewrites the file; "
        r"close any program that holds it open first\); meanwhile use `opsaudit query`",
        views,
    ), views
    assert new_files > 0 and result.exit_code == 0  # a warning: the next sync rewrites it


def test_a_state_an_older_opsaudit_wrote_is_named_by_its_own_format(tmp_path: Path) -> None:
    """Readers read an older state as migrated in memory: doctor then named the copy's format
    (`state format 12`) for a file of format 6."""
    import shutil

    data_dir = tmp_path / "data"
    shutil.copytree(Path(__file__).parents[1] / "assets" / "pre-superseded", data_dir)
    result = offline_doctor(data_dir)
    [state] = [line for line in result.stdout.splitlines() if " state: " in line]
    assert state == f"ok    state: state format 6 (this opsaudit reads {FORMAT_VERSION})"


def test_a_corrupt_state_beside_a_views_file_is_reported_with_the_rest(
    sim: Any, tmp_path: Path
) -> None:
    """The views check opened the state again for its files: a corrupt state ended doctor
    there (exit 6, the error alone) instead of the state's finding among the others."""
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    (data_dir / "state.sqlite").write_bytes(b"garbage" * 200)
    result = doctor(sim, data_dir, sim.personal_key)
    assert result.exit_code == 8, result.output
    kinds = [line.split(":", 1)[0].split()[-1] for line in result.stdout.splitlines()]
    assert kinds[-2:] == ["state", "views"]
    assert [line.split()[0] for line in result.stdout.splitlines()][-2:] == ["error", "ok"]


def test_a_data_file_that_is_not_parquet_is_a_finding_the_readers_exit_6_and_a_sync_writes_it(
    sim: Any, tmp_path: Path
) -> None:
    """A table's file that is not Parquet (cut, or written by something else): query and report
    exited 7 with DuckDB's "too small to be a Parquet file" (an SQL error, no file, no fix),
    doctor said ok, and a names table stayed damaged until the names next changed."""
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    for relative in ("sync_runs/sync_runs.parquet", "branches/branches.parquet"):
        (data_dir / relative).write_bytes(b"garbage\n")

    def damaged(table: str) -> str:
        return (
            f"{data_dir}: table {table} cannot be read: its file {table}/{table}.parquet is not "
            "a Parquet file (Parquet magic bytes not found in footer); opsaudit writes each file "
            f"whole, so something else wrote or cut it. Fix: run `opsaudit sync`: {table} holds "
            "nothing the state does not, the next sync writes the file again"
        )

    result = doctor(sim, data_dir, sim.personal_key)
    assert result.exit_code == 8, result.output
    files = [line for line in result.stdout.splitlines() if " files: " in line]
    assert files == [f"error files: {damaged('sync_runs')}", f"error files: {damaged('branches')}"]
    assert [line for line in result.stdout.splitlines() if " views: " in line] == []
    for sql, table in (("FROM sync_runs", "sync_runs"), ("FROM branches", "branches")):
        query = invoke("query", "--data-dir", str(data_dir), sql)
        assert (query.exit_code, query.stderr) == (6, f"Error: {damaged(table)}\n")
    report = invoke("report", "--data-dir", str(data_dir))
    assert (report.exit_code, report.stderr) == (6, f"Error: {damaged('branches')}\n")

    assert run_sync(sim, data_dir).outcome == "ok"  # both written again from the state
    import pyarrow.parquet as pq

    branches = pq.read_table(data_dir / "branches" / "branches.parquet").num_rows
    query = invoke("query", "--data-dir", str(data_dir), "SELECT count(*) FROM branches")
    assert (query.exit_code, query.stdout.splitlines()[2].strip()) == (0, str(branches))
    assert branches > 0
    [(live,)] = state_rows(data_dir, "SELECT count(*) FROM files WHERE state = 'live'")
    result = doctor(sim, data_dir, sim.personal_key)
    assert result.exit_code == 0, result.output
    files = [line for line in result.stdout.splitlines() if " files: " in line]
    assert files == [f"ok    files: {live} committed file(s) and the tables are Parquet"]


def test_an_operations_file_that_is_not_parquet_is_restored_from_a_backup(
    sim: Any, tmp_path: Path
) -> None:
    """A committed file of operation_versions that is cut: the readers' exit 7 and doctor's ok
    said nothing of the file, nor that no sync can write it again."""
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    [(relative,)] = state_rows(
        data_dir,
        "SELECT min(path) FROM files WHERE state = 'live' AND path LIKE 'operation_versions/%'",
    )
    whole = (data_dir / relative).read_bytes()
    (data_dir / relative).write_bytes(whole[: len(whole) // 2])
    problem = (
        f"{data_dir}: table operation_versions cannot be read: its file {relative} is not a "
        "Parquet file (Parquet magic bytes not found in footer); opsaudit writes each file "
        "whole, so something else wrote or cut it."
    )
    fix = f"restore {relative} from a backup; opsaudit cannot rebuild operation_versions"
    result = doctor(sim, data_dir, sim.personal_key)
    files = [line for line in result.stdout.splitlines() if " files: " in line]
    assert (result.exit_code, files) == (8, [f"error files: {problem} Fix: {fix}"])
    # No views line after it: "opsaudit.duckdb does not answer ... Fix: run `opsaudit sync` (it
    # rewrites the file); meanwhile use `opsaudit query`" contradicted it (neither helps).
    assert [line for line in result.stdout.splitlines() if " views: " in line] == []
    query = invoke("query", "--data-dir", str(data_dir), "SELECT count(*) FROM operations")
    assert (query.exit_code, query.stderr) == (6, f"Error: {problem} Fix: {fix}\n")


def test_a_damaged_file_outside_the_data_dir_is_the_querys_error(
    sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's own damaged file in a folder named like a table (`mine/projects/foo.parquet`,
    outside the data directory) was taken for the dataset's: exit 6, "run `opsaudit sync`",
    instead of the query's exit 7 with DuckDB's error. A relative --data-dir still names its own
    damaged files."""
    from exporter.analytics.views import connect, execute
    from exporter.core.errors import QueryError

    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    own = Path("mine", "projects", "foo.parquet")  # relative: DuckDB's LINE quotes it whole
    monkeypatch.chdir(tmp_path)
    own.parent.mkdir(parents=True)
    own.write_bytes(b"garbage\n")
    sql = f"FROM read_parquet('{own}')"
    query = invoke("query", "--data-dir", str(data_dir), sql)
    assert (query.exit_code, query.stderr) == (
        7,
        f'Error: Permission Error: Cannot access file "{own}" - file system operations are '
        f"disabled by configuration\n\nLINE 1: {sql}\n{' ' * 13}{'^' * (len(sql) - 5)}\n",
    )
    con = connect(data_dir)  # a notebook's connection reads any file
    try:
        with pytest.raises(QueryError) as caught:
            execute(con, sql)
    finally:
        con.close()
    assert str(caught.value) == (
        f"Invalid Input Error: File '{own}' too small to be a Parquet file\n\nLINE 1: {sql}\n"
        f"{' ' * 13}{'^' * (len(sql) - 5)}"
    )

    (data_dir / "sync_runs" / "sync_runs.parquet").write_bytes(b"garbage\n")
    query = invoke("query", "--data-dir", "data", "FROM sync_runs")
    assert (query.exit_code, query.stderr) == (
        6,
        f"Error: {data_dir.resolve()}: table sync_runs cannot be read: its file "
        "sync_runs/sync_runs.parquet is not a Parquet file (Parquet magic bytes not found in "
        "footer); opsaudit writes each file whole, so something else wrote or cut it. Fix: run "
        "`opsaudit sync`: sync_runs holds nothing the state does not, the next sync writes the "
        "file again\n",
    )
