"""`opsaudit.duckdb`: every view, opened by the DuckDB CLI from PyPI, relocatable, atomic refresh,
never blocked by a reader."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from exporter.analytics.views import list_views, write_views_database

from .conftest import write_dataset


@pytest.fixture
def own_data_dir(tmp_path: Path) -> Path:
    """A private copy of the fixed dataset: these tests write opsaudit.duckdb into it."""
    return write_dataset(tmp_path / "data")


def duckdb_cli_binary() -> str:
    """The DuckDB CLI from PyPI (`duckdb-cli`, in the test extra)."""
    binary = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
    assert binary is not None, "the DuckDB CLI is missing: pip install -e '.[test]'"
    return binary


def duckdb_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The DuckDB CLI as a user runs it."""
    return subprocess.run(
        [duckdb_cli_binary(), "-readonly", "-csv", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


VIEWS_SQL = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"


@pytest.mark.parametrize("files_only", [False, True])
def test_views_database_opens_in_the_duckdb_cli(
    own_data_dir: Path, files_only: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Written whole, or (`files_only`) a copy of that file with its definitions naming files
    written again: the copy keeps the storage format the CLI releases read (issue 24)."""
    path = write_views_database(own_data_dir)
    if files_only:
        caplog.set_level(logging.DEBUG, logger="opsaudit.storage")
        path = write_views_database(own_data_dir, files_only=True)
        written = [
            r.getMessage() for r in caplog.records if "opsaudit.duckdb written" in r.getMessage()
        ]
        assert written == ["opsaudit.duckdb written (the definitions naming files)"]
    assert path == own_data_dir.resolve() / "opsaudit.duckdb"
    # The CLI release may be older than the duckdb Python package that wrote the file.
    out = duckdb_cli(
        "opsaudit.duckdb",
        "-c",
        "SELECT count(*) AS n FROM operations",
        "-c",
        VIEWS_SQL,
        cwd=own_data_dir,
    )
    assert out.stderr == ""
    assert out.stdout == "n\n12\nview_name\n" + "".join(
        f"{name}\n" for name in sorted(list_views())
    )
    assert not list(own_data_dir.glob(".opsaudit.duckdb.*")), "no temp file left behind"


def test_views_database_keeps_working_after_the_directory_is_moved(
    own_data_dir: Path, tmp_path: Path
) -> None:
    write_views_database(own_data_dir)
    copied = tmp_path / "restored" / "copy"
    shutil.copytree(own_data_dir, copied)
    moved = tmp_path / "moved"
    own_data_dir.rename(moved)  # the original is gone: nothing may still point at it
    sql = "SELECT count(*) AS n, count(DISTINCT project_id) AS p FROM operations"
    for where in (copied, moved):
        out = duckdb_cli("opsaudit.duckdb", "-c", sql, cwd=where)
        assert (out.stdout, out.stderr) == ("n,p\n12,2\n", ""), where
        con = duckdb.connect(str(where / "opsaudit.duckdb"), read_only=True)
        try:
            con.execute(f"SET file_search_path = '{where}'")  # from elsewhere: say where
            assert con.execute(sql).fetchone() == (12, 2)
        finally:
            con.close()


@pytest.mark.parametrize("name", ["a,b", "what?now", "it's,a?dir"])
def test_views_database_of_a_directory_whose_name_duckdb_splits(tmp_path: Path, name: str) -> None:
    """DuckDB reads `file_search_path` as a comma-separated list and a `?` in ATTACH as
    options: the file was not written (sync exit 0 with a warning), and doctor's check of it
    failed too."""
    from exporter.ops.doctor import DoctorReport, _check_views

    data_dir = write_dataset(tmp_path / name)
    assert write_views_database(data_dir) == data_dir.resolve() / "opsaudit.duckdb"
    sql = "SELECT count(*) AS n FROM operations; SELECT count(*) AS v FROM operation_versions"
    out = duckdb_cli("opsaudit.duckdb", "-c", sql, cwd=data_dir)
    assert (out.stdout, out.stderr) == ("n\n12\nv\n15\n", "")
    report = DoctorReport()
    _check_views(report, data_dir, [])  # no state: no committed files to compare (as doctor)
    assert [(f.check, f.level, f.message) for f in report.findings] == [
        ("views", "ok", "opsaudit.duckdb answers (15 operation versions)")
    ]


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
        holder.execute(f"SET file_search_path = '{own_data_dir}'")  # its paths are relative
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
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True, cwd=path.parent
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


def test_a_read_only_reader_is_not_replaced_under(own_data_dir: Path) -> None:
    """A read-only holder (`duckdb -readonly opsaudit.duckdb`, a notebook's read_only=True)
    is a program holding the file open, as a read-write one is: the file is not replaced
    under it (the compaction inputs it names are then kept: below)."""
    path = write_views_database(own_data_dir)
    assert path is not None
    proc = _hold(path, read_only=True)
    try:
        started = time.monotonic()
        assert write_views_database(own_data_dir) is None
        assert time.monotonic() - started < 5
    finally:
        _stop(proc)
    assert write_views_database(own_data_dir) == path  # refreshed once it is closed


def test_a_read_only_shell_keeps_answering_across_a_compaction(tmp_path: Path) -> None:
    """`duckdb -readonly opsaudit.duckdb` open while a sync compacted: the file was replaced
    (a read-only holder did not count as holding it) and the compaction's inputs, which its
    copy names, deleted: its next query failed, "No files found that match the pattern"."""
    from exporter.api.client import RetryPolicy
    from exporter.engine.sync import SyncConfig, sync
    from exporter.engine.walk import WalkLimits
    from exporter.simulator import SimConfig, Simulator

    config = SimConfig(
        seed=5,
        projects=2,
        shared_projects=0,
        orgs=1,
        days=2,
        ops_per_project_per_day=60,
        live_ops_per_project_per_hour=40,
    )
    data_dir = tmp_path / "data"
    with Simulator(config) as sim:

        def run() -> None:
            summary = sync(
                SyncConfig(
                    data_dir=data_dir,
                    api_key=sim.personal_key,
                    base_url=sim.base_url,
                    max_rps=None,
                    retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
                    commit_rows=20,
                    commit_seconds=0.2,
                    spill_rows=None,  # commits of commit_rows: many small files, compacted
                    limits=WalkLimits(page_size=20, flush_rows=20),
                )
            )
            assert summary.outcome == "ok", summary

        run()
        code = (
            "import duckdb, sys\n"
            "c = duckdb.connect('opsaudit.duckdb', read_only=True)\n"
            "for _ in sys.stdin:\n"
            "    try:\n"
            "        print(c.execute('SELECT count(*) FROM operation_versions').fetchone()[0],"
            " flush=True)\n"
            "    except duckdb.Error as exc:\n"
            "        print(str(exc).splitlines()[0], flush=True)\n"
        )
        shell = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=data_dir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert shell.stdin is not None and shell.stdout is not None

        def ask() -> str:
            assert shell.stdin is not None and shell.stdout is not None
            shell.stdin.write("?\n")
            shell.stdin.flush()
            return shell.stdout.readline().strip()

        try:
            before = ask()
            assert before.isdigit() and int(before) > 0
            sim.advance(8 * 3600)
            run()  # ~600 new operations in small files, compacted at the end of the run
            assert ask() == before  # its copy, whole: none of the files it names is gone
        finally:
            shell.stdin.close()
            shell.wait(timeout=30)
            shell.stdout.close()
        run()  # nothing holds it now: refreshed, and the replaced files deleted
    con = duckdb.connect(str(data_dir / "opsaudit.duckdb"), read_only=True)
    try:
        con.execute(f"SET file_search_path = '{data_dir}'")
        [(versions,)] = con.execute("SELECT count(*) FROM operation_versions").fetchall()
    finally:
        con.close()
    on_disk = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{data_dir}/operation_versions/*/*.parquet')"
    ).fetchall()
    assert versions > int(before)
    assert on_disk == [(versions,)]  # the replaced files were deleted: no row twice


def test_an_empty_source_stands_in_with_duckdbs_own_types() -> None:
    """The empty relation of a source with no file yet types its columns as DuckDB types the
    source's Arrow columns (checked against DuckDB's own reading of them, for every source)."""
    from exporter.analytics.views import _source_schema, duckdb_type
    from exporter.core.layout import SOURCES

    for source in SOURCES:
        schema = _source_schema(source)
        expected = [str(t) for t in duckdb.connect().from_arrow(schema.empty_table()).types]
        assert [duckdb_type(field.type) for field in schema] == expected, source


def test_views_over_sources_without_files_do_not_load_pandas(tmp_path: Path) -> None:
    """An empty data directory: every source stands in as an empty relation. DuckDB's
    from_arrow, which typed them before, imported pandas (~0.33 s of CPU, ~45 MiB) in the
    sync's views child and in `opsaudit query`."""
    script = (
        "import sys\n"
        "from exporter.analytics.views import list_views, write_views_database\n"
        "write_views_database(sys.argv[1])\n"
        "print(len(list_views()) > 0, 'pandas' in sys.modules)\n"
    )
    (tmp_path / "d").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True False"]
    rows = duckdb.connect(str(tmp_path / "d" / "opsaudit.duckdb"), read_only=True).sql(
        "SELECT count(*) FROM operations"
    )
    assert rows.fetchall() == [(0,)]


# Ages and thresholds across the DST change of 2025-03-09 in America/Los_Angeles (the fixed
# dataset's operations were created 2025-01-11 and -12 UTC, PST; as_of is in PDT).
DST_AS_OF = "TIMESTAMPTZ '2025-03-20 00:00:00+00'"
DST_SQL = (
    f"SELECT id, age FROM stuck_operations_older_than(INTERVAL 1 HOUR, as_of := {DST_AS_OF});"
    # o5's age is 67 days 14 hours exactly: older than 13 hours more, not than 14.
    "SELECT count(*) AS n FROM stuck_operations_older_than("
    f"INTERVAL '67 days 14 hours', as_of := {DST_AS_OF});"
    "SELECT id FROM stuck_operations_older_than("
    f"INTERVAL '67 days 13 hours', as_of := {DST_AS_OF});"
    # o12 (scheduling) is 66 days 12 hours old exactly: not stuck that long after.
    "SELECT kind, id, age, old FROM report_problems("
    f"as_of := {DST_AS_OF}, stuck_after := INTERVAL '66 days 12 hours');"
)
DST_EXPECTED = (
    "id,age\n"
    "o5,67 days 14:00:00\n"
    "o7,66 days 16:00:00\n"
    "o8,66 days 15:00:00\n"
    "o12,66 days 12:00:00\n"
    "n\n0\n"
    "id\no5\n"
    "kind,id,age,old\n"
    "failing,o5,67 days 14:00:00,true\n"
    "failing,o8,66 days 15:00:00,true\n"
    "stuck,o7,66 days 16:00:00,true\n"
)


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_ages_and_thresholds_do_not_depend_on_the_session_time_zone(
    own_data_dir: Path, zone: str
) -> None:
    """`duckdb opsaudit.duckdb` runs in the machine's zone (opsaudit sets UTC): TIMESTAMPTZ
    minus TIMESTAMPTZ, or minus an INTERVAL of days, counts days in the session's zone, so an
    age across a DST change was an hour short and a threshold of days an hour off in
    America/Los_Angeles. Every reader sees the UTC figures."""
    write_views_database(own_data_dir)
    env = {**os.environ, "TZ": zone}
    out = subprocess.run(
        [duckdb_cli_binary(), "-readonly", "-csv", "opsaudit.duckdb"],
        input=f"SET TimeZone = '{zone}';\n{DST_SQL}\n",
        cwd=own_data_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.stdout, out.stderr) == (DST_EXPECTED, "")
    con = duckdb.connect(str(own_data_dir / "opsaudit.duckdb"), read_only=True)
    try:
        con.execute(f"SET file_search_path = '{own_data_dir}'")
        con.execute(f"SET TimeZone = '{zone}'")
        ages = con.execute(
            "SELECT id, age FROM stuck_operations_older_than("
            f"INTERVAL 1 HOUR, as_of := {DST_AS_OF})"
        ).fetchall()
    finally:
        con.close()
    assert ages == [
        ("o5", dt.timedelta(days=67, hours=14)),
        ("o7", dt.timedelta(days=66, hours=16)),
        ("o8", dt.timedelta(days=66, hours=15)),
        ("o12", dt.timedelta(days=66, hours=12)),
    ]
