"""The report's failing and stuck lists written by DuckDB for `--format json`
(`build_report(lists_as_json=True)`, sql/90_report.sql `report_problems_json`): the same bytes as
the rows written by orjson, for any text, instant and age."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from exporter.analytics.format import jsonable
from exporter.analytics.report import build_report
from exporter.analytics.report_text import render_report
from exporter.analytics.views import connect

from .conftest import as_synced, at, write_dataset, write_versions

# Error texts as the API could send them: quotes, backslashes, control characters, non-ASCII,
# text that looks like an escape; the last two are written by to_json with upper-case hex
# (U+000B, and a backslash before "u001F"), where the report builds the rows instead.
PLAIN_TEXTS = [
    'quota "exceeded"',
    "path C:\\tmp\\x and a / slash",
    "line one\nline two\ttab\r\x08\x0c",
    "bell \x07 and \x01 and \x10 and \x19",
    "déjà vu \u2028 \u00ff 🐘 日本",
    "",
]
ODD_TEXTS = ["vertical \x0b tab", "looks escaped \\u001F here"]


def _report_json(
    data_dir: Path, now: dt.datetime, by_duckdb: bool = True, **window: Any
) -> tuple[bytes, bytes]:
    """The report's JSON with the lists as rows, and with them written by DuckDB (`by_duckdb`:
    whether DuckDB wrote them, or the report fell back to the rows)."""
    con = connect(data_dir)
    try:
        rows = render_report(build_report(con, now=now, **window), "json")
        written = build_report(con, now=now, lists_as_json=True, **window)
        assert (written.lists_json is not None) is by_duckdb
        if by_duckdb:
            assert written.failing_operations == written.stuck_operations == []
        return rows.encode(), render_report(written, "json").encode()
    finally:
        con.close()


def _with_texts(tmp_path: Path, texts: list[str]) -> Path:
    """The fixed dataset plus a failing and a running operation per text (error and id)."""
    data_dir = write_dataset(tmp_path / "data")
    specs = []
    for i, text in enumerate(texts):
        created = at(12, 1, i)
        specs += [
            (f"f{i}-{text}", "p1", "ep1", "start_compute", "failed", 1, None, created, 3, text, 1),
            (f"s{i}-{text}", "p2", "ep2", "create_branch", "running", 0, None, created, 1, text, 1),
        ]
    write_versions(data_dir, specs, "run-3")
    return as_synced(data_dir)


@pytest.mark.parametrize("texts", [PLAIN_TEXTS, PLAIN_TEXTS + ODD_TEXTS], ids=["plain", "odd"])
def test_the_lists_written_by_duckdb_are_the_bytes_orjson_writes(
    tmp_path: Path, texts: list[str]
) -> None:
    """Every list row of the JSON format is the same bytes either way, for texts that need
    escaping, at a `now` half a second past the second (every age a tie: rounded to even)."""
    data_dir = _with_texts(tmp_path, texts)
    now = dt.datetime(2025, 1, 13, 0, 0, 0, 500_000, tzinfo=dt.timezone.utc)
    by_duckdb = texts == PLAIN_TEXTS
    rows, written = _report_json(data_dir, now, by_duckdb)
    assert written == rows
    con = connect(data_dir)
    try:  # as_dict reads the lists back: the same values as from the rows
        as_rows = build_report(con, now=now).as_dict()
        assert build_report(con, now=now, lists_as_json=True).as_dict() == as_rows
        assert len(as_rows["failing_operations"]) == len(texts) + 2  # o5, o8 and one a text
    finally:
        con.close()
    assert b'"id": "f0-quota \\"exceeded\\""' in rows  # the texts are in the lists
    for window in ({"since": at(12, 0)}, {"project_ids": ["p2"]}):
        rows, written = _report_json(data_dir, now, by_duckdb, **window)
        assert written == rows
    # A window with no operation: both lists empty.
    rows, written = _report_json(data_dir, now, until=at(1, 0))
    assert written == rows
    assert b'"failing_operations": [],' in rows


def test_without_the_record_the_lists_are_the_same_bytes(data_dir: Path) -> None:
    """A dataset without the records (report_rows over every version): the same bytes."""
    now = dt.datetime(2025, 1, 13, 0, 0, 0, 500_001, tzinfo=dt.timezone.utc)
    rows, written = _report_json(data_dir, now)
    assert written == rows


def test_ages_round_half_to_even_as_python_does(con: Any) -> None:
    """report_age_seconds: whole seconds of a microsecond count as Python's round(us / 1e6)
    (half to even), negative ages included; report_json_age writes them as `jsonable`."""
    samples = [
        n * 1_000_000 + r
        for n in (-3, -2, -1, 0, 1, 2, 3, 86_400 * 180 + 1)
        for r in (0, 1, 499_999, 500_000, 500_001, 999_999)
    ]
    got = con.execute(
        "SELECT list(report_json_age(report_age_seconds(us, (us % 1000000 + 1000000) % 1000000))"
        " ORDER BY i) FROM (SELECT unnest(?::BIGINT[]) AS us, generate_subscripts(?, 1) AS i)",
        [samples, samples],
    ).fetchone()[0]
    expected = ['"' + jsonable(dt.timedelta(seconds=round(us / 1_000_000))) + '"' for us in samples]
    assert got == expected


def test_instants_are_written_as_jsonable_writes_them(con: Any) -> None:
    """report_json_instant: ISO 8601 UTC with Z, microseconds only when there are some."""
    instants = [
        dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        dt.datetime(2025, 1, 2, 3, 4, 5, 7, tzinfo=dt.timezone.utc),
        dt.datetime(2025, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.timezone.utc),
        dt.datetime(1969, 12, 31, 23, 59, 59, 250_000, tzinfo=dt.timezone.utc),
    ]
    got = [
        con.execute("SELECT report_json_instant(?::TIMESTAMPTZ)", [t]).fetchone()[0]
        for t in instants
    ]
    assert got == ['"' + jsonable(t) + '"' for t in instants]
    assert con.execute("SELECT report_json_instant(NULL::TIMESTAMPTZ)").fetchone()[0] == "null"
