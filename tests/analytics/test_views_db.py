"""`opsaudit.duckdb`: every view, absolute paths, atomic refresh, never blocked by a reader."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from exporter._sql import list_views, write_views_database

from .conftest import write_dataset


@pytest.fixture
def own_data_dir(tmp_path: Path) -> Path:
    """A private copy of the fixed dataset: these tests write opsaudit.duckdb into it."""
    return write_dataset(tmp_path / "data")


def test_views_database_answers_from_anywhere(own_data_dir: Path, tmp_path: Path) -> None:
    path = write_views_database(own_data_dir)
    assert path == own_data_dir.resolve() / "opsaudit.duckdb"
    # A shell started elsewhere: the paths inside the views are absolute.
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
            "print(c.execute('SELECT count(*) FROM operations').fetchone()[0]); "
            "print(sorted(r[0] for r in c.execute("
            "'SELECT view_name FROM duckdb_views() WHERE NOT internal').fetchall()))",
            str(path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    count, views = out.stdout.splitlines()
    assert count == "12"
    assert views == str(sorted(list_views()))
    assert not list(own_data_dir.glob(".opsaudit.duckdb.*")), "no temp file left behind"


def test_views_database_on_an_empty_data_dir(tmp_path: Path) -> None:
    path = write_views_database(tmp_path)
    assert path is not None
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM operations").fetchone() == (0,)
    finally:
        con.close()


def test_refresh_replaces_the_file(own_data_dir: Path) -> None:
    first = write_views_database(own_data_dir)
    assert first is not None
    inode = first.stat().st_ino
    assert write_views_database(own_data_dir) == first
    assert first.stat().st_ino != inode  # a new file renamed into place, not edited in place


def test_writer_in_this_process_does_not_block_or_raise(own_data_dir: Path) -> None:
    path = write_views_database(own_data_dir)
    assert path is not None
    holder = duckdb.connect(str(path))  # read-write, as `duckdb opsaudit.duckdb` opens it
    try:
        started = time.monotonic()
        assert write_views_database(own_data_dir) is None
        assert time.monotonic() - started < 5
        assert holder.execute("SELECT count(*) FROM operations").fetchone() == (12,)
    finally:
        holder.close()
    assert write_views_database(own_data_dir) == path  # refreshed once it is closed


def _hold(path: Path, *, read_only: bool) -> subprocess.Popen[str]:
    code = (
        "import duckdb, sys, time; "
        f"c = duckdb.connect(sys.argv[1], read_only={read_only}); "
        "c.execute('SELECT count(*) FROM operations').fetchone(); "
        "print('open', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "open"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_shell_in_another_process_does_not_block_or_raise(own_data_dir: Path) -> None:
    path = write_views_database(own_data_dir)
    assert path is not None
    proc = _hold(path, read_only=False)
    try:
        started = time.monotonic()
        assert write_views_database(own_data_dir) is None
        assert time.monotonic() - started < 5
    finally:
        _stop(proc)
    assert write_views_database(own_data_dir) == path


def test_read_only_reader_keeps_its_copy_while_the_file_is_replaced(own_data_dir: Path) -> None:
    path = write_views_database(own_data_dir)
    assert path is not None
    proc = _hold(path, read_only=True)
    try:
        assert write_views_database(own_data_dir) == path
    finally:
        _stop(proc)
