"""Storage safety: lock, corrupt/foreign/newer state, staged commits, recovery, compaction."""

from __future__ import annotations

import inspect
import shutil
import sqlite3
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner

from exporter.analytics.views import connect
from exporter.cli import cli
from exporter.core.errors import LockHeldError, StorageError
from exporter.core.operation import operations_from
from exporter.engine.publish import compact, publish
from exporter.engine.records import created_micros, encode_raw, versions_table
from exporter.store.local.dataset import Dataset

from .conftest import read_versions


def _sync_cli(data_dir: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(data_dir), "--base-url", "http://127.0.0.1:9/api/v2", *extra],
        env={"NEON_API_KEY": "k"},
    )
    return result.exit_code, result.output


def _op(i: int, day: int = 16, status: str = "finished", month: int = 1) -> dict[str, object]:
    return {
        "id": f"00000000-0000-0000-0000-{i:012d}",
        "project_id": "p-1",
        "branch_id": "br-1",
        "action": "check_availability",
        "status": status,
        "failures_count": 0,
        "created_at": f"2025-{month:02d}-{day:02d}T10:00:{i % 60:02d}Z",
        "updated_at": f"2025-{month:02d}-{day:02d}T10:00:{i % 60:02d}Z",
        "total_duration_ms": i,
    }


def _table(ops: list[dict[str, object]]) -> pa.Table:
    operations = operations_from(ops)
    return versions_table(
        operations,
        [encode_raw(o) for o in ops],
        created_micros(operations),
        [1] * len(ops),
        [0] * len(ops),
        "run-test",
    )


def _commit(ds: Dataset, ops: list[dict[str, object]], tag: str) -> None:
    table = _table(ops)
    staged = ds.stage_versions(table, tag)
    with ds.state.transaction() as con:
        ds.state.register_pending(con, staged, "run-test")
    ds.publish(staged)


def test_corrupt_state_file_is_exit_6_and_left_untouched(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite"
    tmp_path.mkdir(exist_ok=True)
    state.write_bytes(b"this is not a database at all" * 100)
    before = state.read_bytes()
    code, output = _sync_cli(tmp_path)
    assert code == 6
    assert "corrupt or not an opsaudit state file" in output
    assert state.read_bytes() == before
    # The readers say so with the same code: the SQL's (7) would send one looking at the query.
    for command in (["query", "SELECT 1"], ["report"], ["status"], ["check"]):
        result = CliRunner().invoke(cli, [command[0], "--data-dir", str(tmp_path), *command[1:]])
        assert (result.exit_code, command) == (6, command), result.output
        assert "corrupt or not an opsaudit state file" in result.output
    assert state.read_bytes() == before


def test_foreign_sqlite_file_is_exit_6(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "state.sqlite")
    con.execute("CREATE TABLE t (x)")
    con.execute("PRAGMA application_id = 42")
    con.commit()
    con.close()
    code, output = _sync_cli(tmp_path)
    assert code == 6
    assert "another application" in output


def test_newer_state_version_is_exit_6(tmp_path: Path) -> None:
    Dataset(tmp_path).close()
    con = sqlite3.connect(tmp_path / "state.sqlite")
    con.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    con.commit()
    con.close()
    code, output = _sync_cli(tmp_path)
    assert code == 6
    assert "newer opsaudit" in output


def test_data_without_state_is_refused(tmp_path: Path) -> None:
    part = tmp_path / "operation_versions" / "created_month=2025-01"
    part.mkdir(parents=True)
    (part / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(StorageError, match=r"no state\.sqlite"):
        Dataset(tmp_path)


def test_data_beside_an_empty_state_file_is_refused(tmp_path: Path) -> None:
    """A state file cut to 0 bytes (a restore gone wrong, `> state.sqlite`) was taken for a new
    dataset: the sync exited 0 having started the history again (every version 1), and the
    Parquet files of every earlier state were left as strays, out of every view."""
    ds = Dataset(tmp_path)
    _commit(ds, [_op(1, status="running")], "a")
    ds.close()
    (tmp_path / "state.sqlite").write_bytes(b"")
    code, output = _sync_cli(tmp_path)
    refused = "holds Parquet data but an empty state.sqlite: syncing into it would"
    assert code == 6
    assert refused in output
    # Readers take it for no state, as they take a directory of Parquet alone; `query` and
    # `report` said "an SQLite file of another application (application_id 0x0)".
    status = CliRunner().invoke(cli, ["status", "--data-dir", str(tmp_path)])
    assert (status.exit_code, status.output) == (
        6,
        f"Error: no dataset in {tmp_path} yet: run `opsaudit sync` first\n",
    )
    check = CliRunner().invoke(cli, ["check", "--data-dir", str(tmp_path)])
    assert check.exit_code == 8 and "stale_sync: no sync has run in" in check.output
    doctor = CliRunner().invoke(cli, ["doctor", "--data-dir", str(tmp_path), "--format", "json"])
    (state,) = [c for c in orjson.loads(doctor.output)["findings"] if c["check"] == "state"]
    assert state["level"] == "error" and refused in state["message"], state
    query = CliRunner().invoke(
        cli,
        [
            "query",
            "--data-dir",
            str(tmp_path),
            "SELECT count(*) AS n FROM operation_versions",
            "--format",
            "json",
        ],
    )
    assert (query.exit_code, orjson.loads(query.output)) == (0, [{"n": 1}]), query.output
    assert (tmp_path / "state.sqlite").read_bytes() == b""


def test_lock_held_is_exit_4(tmp_path: Path) -> None:
    holder = Dataset(tmp_path)
    try:
        code, output = _sync_cli(tmp_path)
        assert code == 4
        assert "another opsaudit sync is running" in output
        with pytest.raises(LockHeldError):
            Dataset(tmp_path)
    finally:
        holder.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp:/nowhere", "is not an http(s) URL"),
        ("localhost:8080", "is not an http(s) URL"),
        ("http:///api/v2", "is not an http(s) URL"),
        # These were a ValueError out of the transport: exit 5, "a bug in opsaudit".
        ("http://host:abc", "has no usable port (a number from 1 to 65535 after the host's colon)"),
        (
            "http://host:99999",
            "has no usable port (a number from 1 to 65535 after the host's colon)",
        ),
        ("http://[::1", "is not a valid URL"),
        # These went on to fail discovery as an unreachable API (exit 5).
        ("http://host:0/", "has no usable port (a number from 1 to 65535 after the host's colon)"),
        ("http://:8080/api/v2", "has no host"),
    ],
)
def test_bad_base_url_is_usage_error(tmp_path: Path, url: str, problem: str) -> None:
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(tmp_path), "--base-url", url],
        env={"NEON_API_KEY": "key-of-the-bad-url-test"},
    )
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: Invalid value for '--base-url' (env var: 'OPSAUDIT_BASE_URL'): {url!r} {problem}; "
        "expected something "
        "like https://console.neon.tech/api/v2/"
    )
    assert not (tmp_path / "state.sqlite").exists()  # nothing started


# A secret in --base-url (a password before the host, a token in a query string) is refused,
# and the error does not print it, even when the rest of the URL does not parse (the port).
@pytest.mark.parametrize(
    ("url", "shown", "problem"),
    [
        (
            "http://user:s3cr3t-pw@host:abc/api/v2",
            "http://host:abc/api/v2",
            "holds credentials before the host; the API key goes in NEON_API_KEY",
        ),
        (
            "https://user:s3cr3t-pw@console.example/api/v2",
            "https://console.example/api/v2",
            "holds credentials before the host; the API key goes in NEON_API_KEY",
        ),
        # A "/", "?" or "#" in the password: the userinfo ends at the last "@" (it was shown,
        # or cut short, or taken for a host and port and accepted).
        *(
            (
                f"http://{userinfo}@127.0.0.1:18090/api/v2",
                "http://127.0.0.1:18090/api/v2",
                "holds credentials before the host; the API key goes in NEON_API_KEY",
            )
            for userinfo in ("user:Pa/s3cr3t-pw", "user:Pa?s3cr3t-pw", "user:Pa#s3cr3t-pw")
        ),
        (
            "http://admin:12345/s3cr3t-pw@127.0.0.1:18090/api/v2",
            "http://127.0.0.1:18090/api/v2",
            "holds credentials before the host; the API key goes in NEON_API_KEY",
        ),
        (
            "https://console.example/api/v2?token=s3cr3t-pw",
            "https://console.example/api/v2",
            "has a query string or a fragment, which may hold tokens (not accepted)",
        ),
        (
            "https://console.example/api/v2#s3cr3t-pw",
            "https://console.example/api/v2",
            "has a query string or a fragment, which may hold tokens (not accepted)",
        ),
    ],
)
def test_a_secret_in_the_base_url_is_refused_and_never_printed(
    tmp_path: Path, url: str, shown: str, problem: str
) -> None:
    for command in (["sync", "--data-dir", str(tmp_path)], ["doctor", "--data-dir", str(tmp_path)]):
        result = CliRunner().invoke(
            cli, [*command, "--base-url", url], env={"NEON_API_KEY": "key-of-the-url-test"}
        )
        assert "s3cr3t-pw" not in result.output
        assert f"{shown!r} {problem}" in result.output
    assert not (tmp_path / "state.sqlite").exists()


def test_recover_publishes_committed_and_drops_uncommitted(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    committed = ds.stage_versions(_table([_op(1)]), "a")
    uncommitted = ds.stage_versions(_table([_op(2)]), "b")
    with ds.state.transaction() as con:
        ds.state.register_pending(con, committed, "r")
    ds.close()  # "killed" before publish
    ds = Dataset(tmp_path)
    ds.recover()
    ds.close()
    assert [r["total_duration_ms"] for r in read_versions(tmp_path)] == [1]
    assert not (tmp_path / uncommitted[0].staged).exists()
    assert list((tmp_path / "_staging").iterdir()) == []


def test_versions_split_by_created_month(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    _commit(ds, [_op(1, day=16), _op(2, day=17), _op(3, day=3, month=2)], "t")
    ds.close()
    parts = sorted(p.name for p in (tmp_path / "operation_versions").iterdir())
    assert parts == ["created_month=2025-01", "created_month=2025-02"]
    assert [str(r["created_date"]) for r in read_versions(tmp_path)] == [
        "2025-01-16",
        "2025-01-17",
        "2025-02-03",
    ]


def _glob_count(data_dir: Path) -> int:
    return len(list((data_dir / "operation_versions").glob("*/*.parquet")))


def test_compaction_bounds_files_and_loses_nothing(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    for i in range(40):
        _commit(ds, [_op(i * 3 + k) for k in range(3)], f"t{i}")
    assert _glob_count(tmp_path) == 40
    before = read_versions(tmp_path)
    removed = compact(ds)
    ds.close()
    assert removed == 39
    assert _glob_count(tmp_path) == 1  # the replaced inputs are gone from disk too
    key = lambda r: (r["id"], r["version"])  # noqa: E731
    assert sorted(read_versions(tmp_path), key=key) == sorted(before, key=key)


def test_compaction_leaves_partitions_under_the_threshold_alone(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    for i in range(5):
        _commit(ds, [_op(i)], f"t{i}")
    assert ds.compact() == 0
    ds.close()
    assert _glob_count(tmp_path) == 5


class _Kill(BaseException):
    """Stands for kill -9 at one step of the compaction (nothing after it runs)."""


_COMPACTION_STEPS = [
    ("exporter.store.local.dataset.Dataset.sync_staging", "after the merged file is written"),
    ("exporter.store.local.dataset.Dataset._move_into_place", "after the state registered it"),
    ("exporter.store.state.StateDB.mark_live", "after it was renamed into place"),
    ("exporter.engine.publish.export_tables", "after the swap, before the small tables"),
    (
        "exporter.engine.publish.refresh_views_database",
        "after the tables, before the views refresh",
    ),
    ("exporter.store.local.dataset.Dataset.collect_garbage", "after the views refresh"),
]


@pytest.mark.parametrize("target, when", _COMPACTION_STEPS)
def test_readers_see_each_row_once_at_every_step_of_a_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, when: str
) -> None:
    """Issue 9, finding 6: kill -9 anywhere in a compaction never shows duplicates."""
    ds = Dataset(tmp_path)
    for i in range(40):
        _commit(ds, [_op(i)], f"t{i}")
    # The one-time records first (superseded, summary, flagged): their own publish would take the kill
    # otherwise, and the compaction would never start.
    ds.record_superseded()
    ds.record_summary()
    ds.record_flagged()
    publish(ds)
    expected = sorted(r["id"] for r in read_versions(tmp_path))

    in_compaction: list[bool] = []

    def killed(*args: object, **kwargs: object) -> None:
        in_compaction.append(any(f.function == "_compact_files" for f in inspect.stack()))
        raise _Kill(when)

    with monkeypatch.context() as m:
        m.setattr(target, killed)
        with pytest.raises(_Kill):
            compact(ds)
    # The kill came inside the compaction, or after it registered its output.
    registered = ds.state.query("SELECT count(*) FROM files WHERE run_id = 'compaction'")
    assert in_compaction == [True] or registered == [(1,)], when
    ds.close()
    # A reader right after the kill, through the state's list and the views database.
    assert _ids_through_query(tmp_path) == expected, when
    assert _ids_through_views_db(tmp_path) == expected, when
    # The next writer recovers and finishes; readers still see every row once.
    ds = Dataset(tmp_path)
    compact(ds)
    ds.close()
    assert _ids_through_query(tmp_path) == expected
    assert _ids_through_views_db(tmp_path) == expected
    assert _glob_count(tmp_path) == 1


def _ids_through_query(data_dir: Path) -> list[str]:
    con = connect(data_dir)
    try:
        return [
            r[0] for r in con.execute("SELECT id FROM operation_versions ORDER BY id").fetchall()
        ]
    finally:
        con.close()


def _ids_through_views_db(data_dir: Path) -> list[str]:
    con = duckdb.connect(str(data_dir / "opsaudit.duckdb"), read_only=True)
    try:
        con.execute(f"SET file_search_path = '{data_dir}'")  # its paths are relative to it
        return [
            r[0] for r in con.execute("SELECT id FROM operation_versions ORDER BY id").fetchall()
        ]
    finally:
        con.close()


def test_a_stray_parquet_file_among_the_data_is_never_read(tmp_path: Path) -> None:
    """Issue 15: a file that is not part of the dataset (a stray copy, an older version's
    file, a COPY ... TO written by hand) never breaks or changes what readers see."""
    ds = Dataset(tmp_path)
    _commit(ds, [_op(1), _op(2)], "a")
    publish(ds)
    ds.close()
    part = tmp_path / "operation_versions" / "created_month=2025-01"
    duckdb.sql("COPY (SELECT 1 AS x) TO '" + str(part / "zz.parquet") + "' (FORMAT parquet)")
    (part / "copy.parquet").write_bytes(sorted(part.glob("part-*.parquet"))[0].read_bytes())
    assert _ids_through_query(tmp_path) == [_op(1)["id"], _op(2)["id"]]
    assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]


# Each command reads again on a new connection (the views it named before are stale).
_READERS = [
    ("query", "--format", "csv", "SELECT id, total_duration_ms FROM operations ORDER BY id"),
    ("report", "--format", "csv", "--section", "durations"),
]


@pytest.mark.parametrize("command", _READERS, ids=lambda c: c[0])
def test_a_command_reads_again_when_a_sync_deletes_a_file_it_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    """A sync that ends while `opsaudit query` or `report` runs deletes the files its compaction
    replaced (once opsaudit.duckdb names the output): the command's views name them. It connects
    again and answers as a command started after the sync, not with exit 7 (the SQL's failure)."""
    ds = Dataset(tmp_path)
    for i in range(40):
        _commit(ds, [_op(i * 3 + k) for k in range(3)], f"t{i}")
    args = [*command, "--data-dir", str(tmp_path)]
    before = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert before.exit_code == 0, before.output
    real_connect = connect
    connections: list[int] = []

    def connect_then_compact(*args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        con = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        connections.append(len(connections) + 1)
        if len(connections) == 1:  # the sync ends after the views were defined
            assert compact(ds) == 39
            assert _glob_count(tmp_path) == 1
        return con

    monkeypatch.setattr("exporter.analytics.views.connect", connect_then_compact)
    during = CliRunner().invoke(cli, args, catch_exceptions=False)
    ds.close()
    assert (during.exit_code, during.output) == (0, before.output)
    assert connections == [1, 2]


def test_a_file_removed_by_hand_fails_the_query_after_three_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading again is for a sync's deletions: a committed file missing for good (removed by
    hand) fails with DuckDB's message naming it, after a bounded number of connections."""
    ds = Dataset(tmp_path)
    for i in range(3):
        _commit(ds, [_op(i)], f"t{i}")
    ds.close()
    gone = sorted((tmp_path / "operation_versions").glob("*/*.parquet"))[0]
    gone.unlink()
    real_connect = connect
    connections: list[int] = []

    def counted(*args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        connections.append(1)
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("exporter.analytics.views.connect", counted)
    result = CliRunner().invoke(
        cli, ["query", "--data-dir", str(tmp_path), "SELECT count(*) FROM operations"]
    )
    assert result.exit_code == 7, result.output
    assert gone.name in result.output
    assert len(connections) == 3


FORMAT_2 = Path(__file__).parents[1] / "assets" / "format-2"  # tests/assets/make_format2.py


def _columns(state: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(state)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(r[1] for r in con.execute(f"PRAGMA table_info({t})")) for t in tables}
    finally:
        con.close()


def test_a_state_an_early_format_2_opsaudit_wrote_is_migrated_whole(tmp_path: Path) -> None:
    """Columns were added to format 2's migration after it shipped (budgets, --skip-idle) and it
    ran only for files below 2: a file an early format-2 opsaudit wrote (b930082) was marked
    format 12 without them; `status` and `check` said "unexpected error" (exit 5, "no such
    column: projects_left"), and every sync after the first, for ever. Such a file is migrated
    whole; one already marked without them is repaired (readers: in memory)."""
    from exporter.store.state import StateDB

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    StateDB(fresh / "state.sqlite").close()
    expected = _columns(fresh / "state.sqlite")
    pristine = tmp_path / "pristine"
    shutil.copytree(FORMAT_2, pristine)
    # check as of minutes after the asset's sync (b930082's run of make_format2.py): as of now,
    # its sync is too old (exit 8, the verdict) once two hours have passed.
    for command in (["status"], ["check", "--as-of", "2026-11-29T03:30:00Z"]):
        result = CliRunner().invoke(cli, [*command, "--data-dir", str(pristine)])
        assert result.exit_code == 0, result.output
    assert _columns(pristine / "state.sqlite") != expected  # readers wrote nothing
    StateDB(pristine / "state.sqlite").close()  # a sync's open migrates it
    assert _columns(pristine / "state.sqlite") == expected
    # As the opsaudit before the fix left it: format 12, format 2's late columns missing.
    broken = pristine / "state.sqlite"
    con = sqlite3.connect(broken)
    for table, column in (("runs", "projects_left"), ("projects", "active_us")):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.commit()
    con.close()
    result = CliRunner().invoke(cli, ["status", "--data-dir", str(pristine)])
    assert result.exit_code == 0, result.output
    StateDB(broken).close()
    assert _columns(broken) == expected
