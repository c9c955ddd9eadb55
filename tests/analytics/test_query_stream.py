"""`opsaudit query` writes json, jsonl and csv as the rows are read (a batch in memory, not the
result): the same bytes as the whole result rendered at once, and never a cut output reported
as success when a file it reads is deleted part way (exit 9 on stdout; -o FILE reads again)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from exporter.analytics.format import FORMATS, render
from exporter.analytics.stream import render_batches
from exporter.analytics.views import connect, execute
from exporter.cli import cli

ROOT = Path(__file__).resolve().parents[2]

# Every kind of value the formats write differently: NULLs, unicode (wide, combining, emoji),
# control characters and CSV's own quote and separators, TIMESTAMPTZ (and its infinity),
# dates, intervals, decimals, JSON, lists and maps; rows enough for several batches.
ODD_SQL = """
SELECT v.id, v.version, v.created_at, v.error, v.total_duration_ms, v.endpoint_id,
       CASE WHEN i % 3 = 0 THEN NULL
            WHEN i % 3 = 1 THEN '機能/ログイン é' || chr(0) || chr(27) || '[31m"q",x' || chr(10) || 'y'
            ELSE 'tab' || chr(9) || 'ü' || chr(13) || '😀' END AS odd,
       CASE WHEN i = 7 THEN 'infinity'::TIMESTAMPTZ ELSE v.updated_at END AS at,
       v.created_date, to_seconds(i) AS span, (i / 7)::DECIMAL(18, 3) AS dec,
       v.raw::JSON AS raw_json, [i, NULL] AS list, MAP {'k': i} AS map, i
FROM operation_versions v, range(3) t(i)
ORDER BY v.id, v.version, i
"""


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real dataset (bench/gen_dataset.py: committed files a state lists), 40,000 operations
    over 60 days: one file a day, a few batches each."""
    out = tmp_path_factory.mktemp("stream") / "data"
    gen = [sys.executable, str(ROOT / "bench" / "gen_dataset.py"), str(out)]
    gen += ["--operations", "40000", "--projects", "30", "--days", "60", "--end", "2025-02-28"]
    subprocess.run(gen, check=True, capture_output=True, cwd=ROOT)
    return out


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)


def _whole(data_dir: Path, sql: str, fmt: str, **kwargs: object) -> str:
    """What `opsaudit query` printed before it streamed: the whole result, rendered at once."""
    con = connect(data_dir, safe=True)
    try:
        columns, rows = execute(con, sql)
    finally:
        con.close()
    return render(columns, rows, fmt, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_prints_what_the_whole_result_rendered(
    big_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    sql = f"SELECT * FROM ({ODD_SQL}) WHERE id < '2'"  # ~1/8 of the ids: ~15k rows
    monkeypatch.setattr("exporter.analytics.views.BATCH_ROWS", 777)  # many batches, one cut
    expected = _whole(big_dir, sql, fmt, max_rows=100)
    assert expected.count("\n") > 14_000 or fmt == "table"
    out = tmp_path / f"rows.{fmt}"
    printed = invoke("query", "--data-dir", str(big_dir), "--format", fmt, sql)
    saved = invoke("query", "--data-dir", str(big_dir), "--format", fmt, "-o", str(out), sql)
    assert (printed.exit_code, saved.exit_code) == (0, 0), printed.output[-2000:]
    assert printed.stdout == expected
    assert out.read_bytes() == expected.encode("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
@pytest.mark.parametrize("cuts", [[], [0], [1], [1, 1, 1], [2, 0, 3], [5]])
def test_pieces_join_to_the_whole_text(big_dir: Path, fmt: str, cuts: list[int]) -> None:
    """Any batches (none, one row, empty ones between) join to `render`'s text: valid JSON."""
    con = connect(big_dir, safe=True)
    try:
        columns, rows = execute(con, f"SELECT * FROM ({ODD_SQL}) LIMIT {sum(cuts)}")
    finally:
        con.close()
    batches, start = [], 0
    for n in cuts:
        batches.append(rows[start : start + n])
        start += n
    assert "".join(render_batches(columns, batches, fmt)) == render(columns, rows, fmt)


def _files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "operation_versions").glob("*/*.parquet"))


@pytest.fixture
def own_dir(big_dir: Path, tmp_path: Path) -> Iterator[Path]:
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(big_dir, copy)
    yield copy


def _delete_last_file_after_first_write(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    """The last day's file removed once the first rows were written (DuckDB has read a few
    days' only): as a sync's compaction deletes what it replaced, or a hand."""
    from exporter.cli._rows import RowsOutput

    real_write = RowsOutput.write
    last = _files(data_dir)[-1]

    def write_then_delete(self: RowsOutput, piece: str) -> None:
        real_write(self, piece)
        last.unlink(missing_ok=True)

    monkeypatch.setattr(RowsOutput, "write", write_then_delete)
    monkeypatch.setattr("exporter.analytics.views.BATCH_ROWS", 100)


SQL_ALL = "SELECT * FROM operation_versions"


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_a_file_deleted_after_rows_reached_stdout_fails_with_exit_9(
    own_dir: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """Reading again would print the first rows twice: the command stops, says the output is
    incomplete and exits 9 (exit 0 would pass a cut result off as the whole)."""
    whole = _whole(own_dir, SQL_ALL, fmt)
    _delete_last_file_after_first_write(monkeypatch, own_dir)
    result = invoke("query", "--data-dir", str(own_dir), "--format", fmt, SQL_ALL)
    assert result.exit_code == 9, result.output[-2000:]
    assert "Error: the output is incomplete: a file the query read was deleted" in result.stderr
    assert "-o FILE" in result.stderr
    assert 0 < len(result.stdout) < len(whole)  # some rows, never twice over


def test_a_file_deleted_while_o_file_is_written_leaves_the_previous_file(
    own_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o FILE: what was written is taken back and read again; a file removed for good fails
    the query (exit 7, DuckDB naming it) and the previous file stays whole, no leftovers."""
    out = tmp_path / "out" / "rows.csv"
    out.parent.mkdir()
    out.write_text("previous\n")
    gone = _files(own_dir)[-1].name
    _delete_last_file_after_first_write(monkeypatch, own_dir)
    args = ["query", "--data-dir", str(own_dir), "--format", "csv", "-o", str(out), SQL_ALL]
    result = invoke(*args)
    assert result.exit_code == 7, result.output[-2000:]
    assert gone in result.stderr
    assert out.read_text() == "previous\n"
    assert [p.name for p in out.parent.iterdir()] == ["rows.csv"]


def test_o_file_reads_again_when_a_sync_compacts_under_it(
    own_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync's compaction replaces the files the query reads and deletes them once rows were
    written to -o FILE: the query reads again and the file holds every row once."""
    from exporter.cli._rows import RowsOutput
    from exporter.engine.publish import compact
    from exporter.store.local.dataset import Dataset

    expected = _whole(own_dir, SQL_ALL, "csv").splitlines()
    real_write = RowsOutput.write
    real_connect = connect
    compacted: list[int] = []
    connections: list[int] = []

    def write_then_compact(self: RowsOutput, piece: str) -> None:
        real_write(self, piece)
        if not compacted:
            ds = Dataset(own_dir)
            try:
                compacted.append(compact(ds))
            finally:
                ds.close()

    def counted(*args: object, **kwargs: object) -> object:
        connections.append(1)
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(RowsOutput, "write", write_then_compact)
    # A month's 28-31 daily files merged (a sync merges from 32 small files a month on).
    monkeypatch.setattr("exporter.store.local.dataset.COMPACT_MIN_FILES", 2)
    monkeypatch.setattr("exporter.analytics.views.connect", counted)
    monkeypatch.setattr("exporter.analytics.views.BATCH_ROWS", 100)
    out = tmp_path / "rows.csv"
    args = ["query", "--data-dir", str(own_dir), "--format", "csv", "-o", str(out), SQL_ALL]
    result = invoke(*args)
    assert result.exit_code == 0, result.output[-2000:]
    assert compacted == [59] and len(connections) == 2  # each month into one: read again, once
    lines = out.read_text().splitlines()
    assert lines[0] == expected[0] and sorted(lines[1:]) == sorted(expected[1:])
    assert len(lines) == len(expected) > 40_000


def test_rows_reach_a_pipe_before_the_last_file_is_read(own_dir: Path) -> None:
    """The first rows arrive while the query still reads (the whole result was held before:
    3M rows as jsonl, 11 GiB): the last file deleted once the first line was read is missed,
    and the command says so with exit 9, not 0."""
    gone = _files(own_dir)[-1]
    cmd = [sys.executable, "-m", "exporter", "query", "--data-dir", str(own_dir)]
    cmd += ["--format", "jsonl", SQL_ALL]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) as child:
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()
        gone.unlink()
        rest = child.stdout.read()
        err = child.stderr.read().decode()
        assert child.wait() == 9, err
    assert first.startswith(b'{"id":') and 0 < rest.count(b"\n") < 40_000
    assert "the output is incomplete" in err


@pytest.mark.parametrize(
    "args",
    [
        ["query", "--format", "csv", "SELECT 1 AS one"],
        ["query", "--format", "table", "SELECT 1 AS one"],
        ["report"],
        ["status"],
    ],
    ids=["query-csv", "query-table", "report", "status"],
)
def test_a_reader_gone_before_anything_was_written_ends_141(big_dir: Path, args: list[str]) -> None:
    """Only the streamed formats knew a closed stdout: `opsaudit report | true` (a reader that
    exits at once, a monitoring probe timed out) said "unexpected error (BrokenPipeError)...
    This is a bug in opsaudit", exit 5. Every command that prints its result ends as `query`'s
    rows do: no message, exit 141."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        child = subprocess.run(
            [sys.executable, "-m", "exporter", args[0], "--data-dir", str(big_dir), *args[1:]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (child.returncode, child.stderr.decode()) == (141, "")


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_an_error_after_rows_were_printed_says_they_are_incomplete(big_dir: Path, fmt: str) -> None:
    """DuckDB can fail part way (a cast, `error()`, at row 300,000): the rows printed before stay
    printed (stdout cannot take them back); the error says they are not the whole result, so
    a script reading exit 7 and the message does not take them for one."""
    # One list unnested: its rows come in order on one thread. Still, on a loaded box DuckDB
    # may reach the failing row before the first rows are fetched (none printed, the error
    # alone): each run is judged by what it printed, until one printed rows.
    sql = (
        "SELECT i FROM (SELECT unnest(range(600000)) AS i) "
        "WHERE i < 300000 OR error('boom') IS NOT NULL"
    )
    cut = (
        "\n(the rows printed before this error are not the whole result: the query failed part way)"
    )
    for _ in range(8):
        result = invoke("query", "--data-dir", str(big_dir), "--format", fmt, sql)
        assert result.exit_code == 7
        said = "Error: Invalid Input Error: boom" + (cut if result.stdout else "") + "\n"
        assert result.stderr == said
        if result.stdout:
            break
    assert result.stdout, "no run printed rows before the error"
    # -o FILE: nothing was printed, nothing is written: the error alone.
    out = big_dir.parent / f"rows.{fmt}"
    failed = invoke("query", "--data-dir", str(big_dir), "--format", fmt, "-o", str(out), sql)
    assert (failed.exit_code, failed.stdout, out.exists()) == (7, "", False)
    assert "not the whole result" not in failed.stderr


@pytest.mark.parametrize("fmt", ["csv", "table"])
@pytest.mark.parametrize("redirect", [">", ">>"])
def test_o_dev_stdout_writes_after_what_the_shell_wrote_before(
    big_dir: Path, tmp_path: Path, fmt: str, redirect: str
) -> None:
    """`{ echo header; opsaudit query -o /dev/stdout ...; } > f`: /dev/stdout is the file the
    shell redirected to, opened anew; opened to write ("wb") it was cut, the header lost."""
    out = tmp_path / "f"
    out.write_text("before\n")
    sql = "SELECT 1 AS a"
    command = (
        f"{{ echo header; {sys.executable} -m exporter query --data-dir {big_dir} "
        f"--format {fmt} -o /dev/stdout '{sql}'; }} {redirect} {out}"
    )
    subprocess.run(["bash", "-c", command], check=True, cwd=ROOT)
    expected = ("before\n" if redirect == ">>" else "") + "header\n" + _whole(big_dir, sql, fmt)
    assert out.read_text() == expected
