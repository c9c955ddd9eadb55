"""The views database after a run: written in a child process (the sync never loads DuckDB),
and only when what it names changed (issue 13)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from exporter.analytics.views import write_views_database
from exporter.analytics.views_db import _write_views_in_child, refresh_views_database
from exporter.engine.publish import publish
from exporter.store.local.dataset import Dataset

from .test_storage import _commit, _ids_through_views_db, _op


def test_the_child_process_writes_the_views_database(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1), _op(2)], "a")
        assert _write_views_in_child(tmp_path) is True
    finally:
        ds.close()
    assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]


def test_the_child_process_reports_a_views_database_held_open(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    try:
        assert _write_views_in_child(tmp_path) is True
        holder = duckdb.connect(str(tmp_path / "opsaudit.duckdb"))  # a DuckDB shell, read-write
        try:
            assert _write_views_in_child(tmp_path) is False
        finally:
            holder.close()
    finally:
        ds.close()


def test_unchanged_views_are_not_rewritten_and_changed_ones_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        publish(ds)
        views = tmp_path / "opsaudit.duckdb"
        inode = views.stat().st_ino
        publish(ds)  # nothing changed: the file stays as it is
        assert views.stat().st_ino == inode
        _commit(ds, [_op(2)], "b")  # a new committed file: the views must name it
        publish(ds)
        assert views.stat().st_ino != inode
        assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]
        inode = views.stat().st_ino
        views.unlink()  # deleted by hand: written again
        refresh_views_database(ds)
        assert views.is_file()
    finally:
        ds.close()


def test_a_failed_refresh_is_retried_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        with monkeypatch.context() as m:
            m.setattr("exporter.analytics.views_db._write_views_in_child", lambda *args: None)
            m.delitem(__import__("sys").modules, "duckdb")
            publish(ds)
        assert not (tmp_path / "opsaudit.duckdb").exists()
        publish(ds)
        assert _ids_through_views_db(tmp_path) == [_op(1)["id"]]
    finally:
        ds.close()


def test_a_sync_that_commits_no_new_file_leaves_the_views_database_alone(
    make_sim: Any, tmp_path: Path
) -> None:
    """The views name the committed files: a run that committed none (nothing new or changed)
    starts no process for them (issue 24: a new interpreter and `import duckdb`, ~0.2 s of CPU);
    the run that did wrote the file by rename (a new inode)."""
    sim = make_sim(seed=26, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    env = {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(tmp_path / "d"),
    }
    views = tmp_path / "d" / "opsaudit.duckdb"

    def sync() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "exporter", "sync", "--max-rps", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr

    sync()
    first = views.stat().st_ino
    sync()  # nothing new: the same file
    assert views.stat().st_ino == first
    sim.advance(60)
    sim.add_operations(sim.project_ids()[0], 3)
    sync()  # three new operations in a new file: rewritten
    assert views.stat().st_ino != first
    assert set(_ids_through_views_db(tmp_path / "d")) == set(sim.ground_truth())


def _every_view(data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every view's rows, read through `opsaudit.duckdb` as a user in the data directory."""
    con = duckdb.connect(str(data_dir / "opsaudit.duckdb"), read_only=True)
    try:
        con.execute(f"SET file_search_path = '{data_dir}'")
        views = [
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
            ).fetchall()
        ]
        return {v: con.execute(f'SELECT * FROM "{v}" ORDER BY ALL').fetchall() for v in views}
    finally:
        con.close()


def test_when_only_the_files_changed_only_the_definitions_naming_them_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: the definitions that name no file (most of the ~0.1 s of CPU of writing the
    views) are kept from the file written before while its shape is the same (the directory,
    which sources have files, the .sql files, the code); every view reads as from a file
    written whole."""
    caplog.set_level(logging.DEBUG, logger="opsaudit.storage")
    root = tmp_path / "d"
    ds = Dataset(root)
    try:
        _commit(ds, [_op(1)], "a")
        publish(ds)  # the first file: written whole
        assert _written(caplog) == ["whole"]
        _commit(ds, [_op(2), _op(3, month=2)], "b")  # new files in the same sources
        publish(ds)
        assert _written(caplog) == ["the definitions naming files"]
        refreshed = _every_view(root)
        assert refreshed["operation_versions"] and len(refreshed) > 20
        assert [r[0] for r in refreshed["operations"]] == [_op(i)["id"] for i in (1, 2, 3)]
        write_views_database(root)  # written whole from the same state: the same rows
        assert _every_view(root) == refreshed
        assert _written(caplog) == ["whole"]
    finally:
        ds.close()
    moved = tmp_path / "moved"  # another directory: another shape, written whole
    shutil.copytree(root, moved)
    ds = Dataset(moved)
    try:
        _commit(ds, [_op(4)], "c")
        publish(ds)
        assert _written(caplog) == ["whole"]
        assert _ids_through_views_db(moved) == [_op(i)["id"] for i in (1, 2, 3, 4)]
    finally:
        ds.close()


def _written(caplog: pytest.LogCaptureFixture) -> list[str]:
    """How the views database was written since the last call (its debug line)."""
    out = [
        r.getMessage().removeprefix("opsaudit.duckdb written (").removesuffix(")")
        for r in caplog.records
        if r.getMessage().startswith("opsaudit.duckdb written (")
    ]
    caplog.clear()
    return out


# A run killed right before or right after `opsaudit.duckdb` is renamed into place (argv[2]):
# the kill -9 lands in the process that writes the file (DuckDB loaded: in-process).
_KILLED_AT_THE_RENAME = """
import os, signal, sys
from pathlib import Path
import duckdb  # loaded: the file is written in this process
import exporter.analytics.views as views
from exporter.engine.publish import publish
from exporter.store.local.dataset import Dataset
from tests.sync.test_storage import _commit, _op

def replace_then_die(src, dst):  # os.replace of every module: only the views' is cut
    views_db = str(dst).endswith("opsaudit.duckdb")
    if not views_db or sys.argv[2] == "after":
        os.rename(src, dst)
    if views_db:
        os.kill(os.getpid(), signal.SIGKILL)

views.os.replace = replace_then_die
ds = Dataset(Path(sys.argv[1]))
_commit(ds, [_op(2)], "b")
publish(ds)
"""


def test_a_file_written_whole_by_a_killed_run_is_never_taken_for_one_of_its_old_shape(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The shape the file was written with is forgotten before a file of another shape is
    written: a run killed after writing it, before recording its shape, leaves a file the
    state's old shape no longer describes, and the next run that finds that old shape again
    (the directory moved back, the code put back) writes the file whole, not its definitions
    naming files only (the others would be those of the other shape)."""
    caplog.set_level(logging.DEBUG, logger="opsaudit.storage")
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    ds = Dataset(home)
    try:
        _commit(ds, [_op(1)], "a")
        publish(ds)  # written whole; the state records its shape (of `home`)
    finally:
        ds.close()
    shutil.copytree(home, elsewhere)  # another directory: another shape
    _killed_writing_the_views(elsewhere, "after")
    shutil.rmtree(home)
    elsewhere.rename(home)  # moved back: the shape the state recorded before the kill
    caplog.clear()
    ds = Dataset(home)
    try:
        _commit(ds, [_op(3)], "c")
        publish(ds)
        assert _written(caplog) == ["whole"]
        assert _ids_through_views_db(home) == [_op(i)["id"] for i in (1, 2, 3)]
    finally:
        ds.close()


def _killed_writing_the_views(data_dir: Path, when: str) -> None:
    """A commit, then its publish killed -9 right `when` ("before", "after") the views
    database is renamed into place."""
    repo = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_THE_RENAME, str(data_dir), when],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert child.returncode == -9, child.stderr


def test_a_views_database_write_killed_before_its_rename_leaves_nothing_behind_it(
    tmp_path: Path,
) -> None:
    """A kill -9 while the views database was written aside leaves its temporary file (and
    its WAL): the next write removes them (one writer at a time: the dataset's lock), so
    killed runs do not pile up copies of the file in the data directory."""
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        publish(ds)
    finally:
        ds.close()
    for _ in range(2):
        _killed_writing_the_views(tmp_path, "before")
    # The second killed writer removed what the first left: one temporary file, not two.
    assert len(list(tmp_path.glob(".opsaudit.duckdb.*"))) == 1
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(3)], "c")
        publish(ds)
    finally:
        ds.close()
    assert list(tmp_path.glob(".opsaudit.duckdb.*")) == []
    assert _ids_through_views_db(tmp_path) == [_op(i)["id"] for i in (1, 2, 2, 3)]


# A process that writes the views database as a sync's end does (in a child: it never loads
# DuckDB), with the child slowed (it sleeps before writing), and that is killed (SIGKILL) as
# soon as the child started: the child writes alone, holding the data directory's lock.
_KILLED_WHILE_ITS_CHILD_WRITES = """
import os, signal, subprocess, sys, types
from pathlib import Path
import exporter.analytics.views_db as v
from exporter.store.local.dataset import Dataset
slowed = (
    "import sys, time; time.sleep(1.5); from exporter.analytics.views import _views_database_main;"
    " sys.exit(_views_database_main(sys.argv[1:]))"
)
def run_then_die(args, *, capture_output, text, timeout, **kwargs):
    subprocess.Popen([sys.executable, "-c", slowed, *args[3:]], **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
v.subprocess = types.SimpleNamespace(**{**vars(subprocess), "run": run_then_die})
assert "duckdb" not in sys.modules  # the child's path, as in a sync
v.refresh_views_database(Dataset(Path(sys.argv[1]), lock=True))
"""


def test_a_sync_killed_while_its_child_writes_the_views_leaves_the_directory_locked(
    tmp_path: Path,
) -> None:
    """The child holds the data directory's lock: a sync killed while it writes
    `opsaudit.duckdb` leaves the directory locked until the child ended, so the next run's
    child never writes alongside it (the last rename would win, naming an older state's files).
    The next run waits for it (the run that took the lock is gone), then finds its file."""
    from exporter.store.local.dataset import LOCK_FILE
    from exporter.store.state import DataDirLock

    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1), _op(2)], "a")
    finally:
        ds.close()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with open(tmp_path / "stderr", "wb") as err:  # a pipe would be held open by the child
        proc = subprocess.run(
            [sys.executable, "-c", _KILLED_WHILE_ITS_CHILD_WRITES, str(tmp_path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            timeout=60,
        )
    assert proc.returncode == -9, (tmp_path / "stderr").read_text()
    assert not (tmp_path / "opsaudit.duckdb").exists()  # the child is still asleep
    lock = DataDirLock(tmp_path / LOCK_FILE)
    started = time.monotonic()
    lock.acquire(wait=False)  # waits for the child: its run is gone
    waited = time.monotonic() - started
    lock.release()
    assert (tmp_path / "opsaudit.duckdb").exists(), f"taken after {waited:.2f}s, the child writes"
    assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]


def test_a_views_writer_killed_is_said_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The child writing opsaudit.duckdb killed (the OOM killer): the warning was its exit code
    alone ("exit code -9"), now what happened and what to do."""
    import signal
    import threading

    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        outcome: list[bool | None] = []
        writer = threading.Thread(target=lambda: outcome.append(_write_views_in_child(tmp_path)))
        with caplog.at_level(logging.WARNING, logger="opsaudit.storage"):
            writer.start()
            wanted = f"exporter.analytics.views\0{tmp_path}\0".encode()
            deadline = time.monotonic() + 30
            child = None
            while child is None and time.monotonic() < deadline:
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    try:
                        if wanted in Path(f"/proc/{pid}/cmdline").read_bytes():
                            child = int(pid)
                    except OSError:
                        continue
            assert child is not None, "the child was not seen"
            os.kill(child, signal.SIGKILL)
            writer.join(60)
    finally:
        ds.close()
    assert outcome == [None]
    assert [r.getMessage() for r in caplog.records] == [
        "could not refresh opsaudit.duckdb: the process writing it was killed (SIGKILL); the "
        "next sync writes it again (if it recurs, give the sync more memory)"
    ]


def test_each_views_failure_gets_its_fix(tmp_path: Path) -> None:
    """A full disk, DuckDB's own, any other error: what failed and what to do."""
    import errno

    from exporter.analytics.views_failure import failure

    views = tmp_path / "opsaudit.duckdb"
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{tmp_path}/.opsaudit.duckdb.1.tmp")
    assert failure(tmp_path, full) == (
        f"cannot write {views}: No space left on device; free some space, then run again"
    )
    with pytest.raises(duckdb.Error) as raised:  # DuckDB's words for a full disk
        duckdb.connect().execute(
            "SELECT error('IO Error: Could not write file \"x\": No space left on device')"
        )
    assert failure(tmp_path, raised.value) == (
        f"cannot write {views}: No space left on device; free some space, then run again"
    )
    with pytest.raises(duckdb.Error) as raised:
        duckdb.connect().execute("SELECT * FROM read_parquet('missing.parquet')")
    assert failure(tmp_path, raised.value) == (
        'IO Error: No files found that match the pattern "missing.parquet"; the next sync '
        "writes it again (`opsaudit doctor` says what to fix if this recurs)"
    )
