"""Rendering of values and rows: JSON types, CSV, aligned tables, Markdown."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import uuid
import zoneinfo

import orjson

from exporter.analytics.format import json_bytes, jsonable, object_keys, render

CET = dt.timezone(dt.timedelta(hours=1))


def test_jsonable() -> None:
    assert jsonable(dt.datetime(2025, 1, 16, 22, 2, 4, tzinfo=CET)) == "2025-01-16T21:02:04Z"
    assert jsonable(dt.datetime(2025, 1, 16, 21, 2, 4, 5, tzinfo=dt.timezone.utc)) == (
        "2025-01-16T21:02:04.000005Z"
    )
    assert jsonable(dt.date(2025, 1, 16)) == "2025-01-16"
    assert jsonable(decimal.Decimal("12.50")) == 12.5
    assert jsonable(decimal.Decimal("12")) == 12
    assert jsonable(dt.timedelta(hours=1, seconds=0.5)) == "PT3600.5S"
    assert [jsonable(dt.timedelta(seconds=s)) for s in (0, 90, -1, -0.5, 86400 * 3 + 1)] == [
        "PT0S",
        "PT90S",
        "-PT1S",
        "-PT0.5S",
        "PT259201S",
    ]
    assert jsonable(float("nan")) is None
    assert jsonable(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert jsonable([dt.date(2025, 1, 1), {"a": decimal.Decimal("1")}]) == ["2025-01-01", {"a": 1}]


@dataclasses.dataclass
class _Point:
    x: int


def test_json_bytes_writes_what_jsonable_gives() -> None:
    """The report's JSON is written without converting every row first (issue 24): byte for
    byte what orjson writes of `jsonable(value)`, for every kind of value a query returns."""
    value = {
        "utc": dt.datetime(2025, 1, 16, 21, 2, 4, tzinfo=dt.timezone.utc),
        "zoned": dt.datetime(2025, 1, 16, 22, 2, 4, 5, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
        "fixed": dt.datetime(2025, 1, 16, 22, 2, 4, tzinfo=CET),
        "naive": dt.datetime(2025, 1, 16, 21, 2, 4, 500000),
        "day": dt.date(2025, 1, 16),
        "clock": dt.time(21, 2, 4, 7),
        "ages": [dt.timedelta(days=1, seconds=3), dt.timedelta(seconds=-0.5), dt.timedelta(0)],
        "decimals": (decimal.Decimal("12.50"), decimal.Decimal("12")),
        "non_finite": [float("nan"), float("inf"), float("-inf"), 0.1, -0.0],
        "other": [uuid.UUID(int=1), b"\x00\xff", _Point(3), None, True, 2**63 - 1, 'é\n"x"'],
        "nested": [{"a": [dt.date(2025, 1, 1)]}, ()],
    }
    for indent in (False, True):
        option = orjson.OPT_INDENT_2 if indent else 0
        assert json_bytes(value, indent=indent) == orjson.dumps(jsonable(value), option=option)
    assert b'"zoned":"2025-01-16T21:02:04.000005Z"' in json_bytes(value)


def test_render_all_formats() -> None:
    columns = ["action", "n", "error"]
    rows = [("start_compute", 12, None), ("x|y", 3, "line one\nline two")]
    assert render(columns, rows, "table") == (
        "action          n  error\n"
        "-------------  --  -----------------\n"
        "start_compute  12  NULL\n"
        "x|y             3  line one line two\n"
        "(2 rows)\n"
    )
    assert render(columns, rows, "csv") == (
        'action,n,error\nstart_compute,12,\nx|y,3,"line one\nline two"\n'
    )
    assert render(columns, rows, "markdown") == (
        "| action | n | error |\n"
        "|---|---:|---|\n"
        "| start_compute | 12 | NULL |\n"
        "| x\\|y | 3 | line one line two |\n"
    )
    assert render(columns, [], "json") == "[]\n"


def test_a_decimal_a_float_cannot_hold_is_written_exactly() -> None:
    """A DECIMAL(38, 2) of 19 digits became 1.2345678901234568e+16 in every format (the
    thirteenth review); one a float holds exactly stays a plain number (1.50 -> 1.5)."""
    big = decimal.Decimal("12345678901234567.89")
    assert json_bytes([big, decimal.Decimal("1.50"), decimal.Decimal("-0.1")]) == (
        b"[12345678901234567.89,1.5,-0.1]"
    )
    assert render(["d"], [(big,)], "jsonl") == '{"d":12345678901234567.89}\n'
    assert render(["d"], [(big,), (decimal.Decimal("1.50"),)], "csv") == (
        "d\n12345678901234567.89\n1.5\n"
    )
    assert render(["d"], [(decimal.Decimal("1E-30"),)], "csv") == "d\n1e-30\n"  # a float holds it


def test_an_integer_past_64_bits_is_written_exactly_in_every_format() -> None:
    """A HUGEINT (DuckDB's sum of a BIGINT column: epoch microseconds of a few thousand
    operations) made `query --format json` exit 5, "unexpected error": orjson writes 64 bits."""
    import duckdb

    from exporter.analytics.views import execute

    sql = (
        "SELECT 170141183460469231731687303715884105727::HUGEINT AS h, "
        "[-18446744073709551617::HUGEINT, 3] AS l, 18446744073709551615::UBIGINT AS u, "
        "123456789012345678901234567890::DECIMAL(38, 0) AS d"
    )
    with duckdb.connect() as con:
        columns, rows = execute(con, sql)
    h = "170141183460469231731687303715884105727"
    assert render(columns, rows, "jsonl") == (
        f'{{"h":{h},"l":[-18446744073709551617,3],"u":18446744073709551615,'
        '"d":123456789012345678901234567890}\n'
    )
    assert (
        render(columns, rows, "csv")
        == f'h,l,u,d\n{h},"[-18446744073709551617,3]",18446744073709551615,123456789012345678901234567890\n'
    )
    assert json.loads(render(columns, rows, "json"))[0]["h"] == int(h)  # (orjson reads a float)


def test_object_keys_are_unique_in_duckdbs_spelling() -> None:
    assert object_keys(["a", "b"]) == ["a", "b"]
    assert object_keys(["id", "x", "id", "id"]) == ["id", "x", "id_1", "id_2"]
    # A name the result has already is not taken for a repeated one.
    assert object_keys(["id", "id", "id_1"]) == ["id", "id_2", "id_1"]
    assert render(["id", "id"], [(1, 2)], "jsonl") == '{"id":1,"id_1":2}\n'


def test_long_cells_are_cut_on_a_terminal_only() -> None:
    text = "e" * 100
    assert render(["error"], [(text,)], "table").splitlines()[2] == "e" * 59 + "…"
    assert text in render(["error"], [(text,)], "json")
    # Markdown is a file (`-o report.md`): it was cut as a terminal's table is, a 5,000
    # character error text to 60 in `report --format markdown`.
    assert render(["error"], [(text + "|x",)], "markdown").splitlines()[2] == f"| {text}\\|x |"


def test_floats_past_a_columns_decimals_keep_their_digits() -> None:
    """0.00004 printed 0 in table and markdown (three decimals at most), and 1e300 as 301
    digits: a value the column's decimals cannot show prints its own significant digits."""
    rows = [(0.00004, 1e300, 1.5), (2.25, -1e20, -0.0001)]
    assert render(["tiny", "big", "f"], rows, "markdown").splitlines()[2:] == [
        "| 4e-05 | 1e+300 | 1.5 |",
        "| 2.25 | -1e+20 | -0.0001 |",
    ]
    assert render(["tiny", "big"], [r[:2] for r in rows], "table").splitlines()[2:4] == [
        "4e-05  1e+300",
        " 2.25  -1e+20",
    ]


def test_table_prints_inf_nan_and_readable_intervals() -> None:
    rows = [
        (float("inf"), float("-inf"), float("nan"), dt.timedelta(days=30, seconds=3112)),
        (1.5, 0.0, None, dt.timedelta(seconds=-1.5)),
        (2.0, 1.0, 3.0, dt.timedelta(days=1)),
    ]
    assert render(["a", "b", "c", "age"], rows, "table") == (
        "  a     b     c  age\n"
        "---  ----  ----  ----------------\n"
        "inf  -inf   nan  30 days 00:51:52\n"
        "1.5     0  NULL  -00:00:01.5\n"
        "2.0     1     3  1 day 00:00:00\n"
        "(3 rows)\n"
    )
    assert render(["a", "b", "c"], [rows[0][:3]], "csv") == "a,b,c\ninf,-inf,nan\n"
    assert render(["a"], [(float("inf"),)], "json") == '[\n  {\n    "a": null\n  }\n]\n'


def test_infinite_timestamps_print_as_duckdb_spells_them() -> None:
    # DuckDB hands a TIMESTAMPTZ infinity to Python as a naive datetime.max/min (no zone): it
    # printed as 9999-12-31T23:59:59.999999 without Z, an instant that is not the value. A
    # TIMESTAMP (no zone) at those extremes is a finite value and prints as one.
    import duckdb

    from exporter.analytics.views import execute

    sql = (
        "SELECT 'infinity'::TIMESTAMPTZ AS a, '-infinity'::TIMESTAMPTZ AS b,"
        " '9999-12-31 23:59:59.999999+00'::TIMESTAMPTZ AS c,"
        " '9999-12-31 23:59:59.999999'::TIMESTAMP AS d, '0001-01-01'::TIMESTAMP AS e"
    )
    with duckdb.connect() as con:
        columns, rows = execute(con, sql)
    assert render(columns, rows, "jsonl") == (
        '{"a":"infinity","b":"-infinity","c":"9999-12-31T23:59:59.999999Z",'
        '"d":"9999-12-31T23:59:59.999999","e":"0001-01-01T00:00:00"}\n'
    )
    assert render(columns[:2], [r[:2] for r in rows], "csv") == "a,b\ninfinity,-infinity\n"


def test_json_values_are_written_as_json() -> None:
    """A value of DuckDB's JSON type (`raw::JSON`, `json_object(...)`) was written by `query
    --format json|jsonl` as a string holding JSON ("{\\"id\\": ...}"), where the DuckDB CLI's
    -jsonlines writes the object: README has users read `raw` with JSON operators."""
    import duckdb

    from exporter.analytics.views import execute

    sql = (
        "SELECT '{\"id\": \"a\",\n \"n\": [1, 2.5]}'::JSON AS j, json_object('k', 'v') AS o, "
        "['1'::JSON, NULL, '\"s\"'::JSON] AS l, NULL::JSON AS n, '{\"x\":1}' AS text_only"
    )
    with duckdb.connect() as con:
        columns, rows = execute(con, sql)
    # Compact: the newline in the JSON's text would split the JSON Lines record.
    assert render(columns, rows, "jsonl") == (
        '{"j":{"id":"a","n":[1,2.5]},"o":{"k":"v"},"l":[1,null,"s"],"n":null,'
        '"text_only":"{\\"x\\":1}"}\n'
    )
    assert json.loads(render(columns, rows, "json")) == [
        {"j": {"id": "a", "n": [1, 2.5]}, "o": {"k": "v"}, "l": [1, None, "s"], "n": None}
        | {"text_only": '{"x":1}'}
    ]
    assert render(columns[:2], [r[:2] for r in rows], "csv") == (
        'j,o\n"{""id"": ""a"",\n ""n"": [1, 2.5]}","{""k"":""v""}"\n'
    )
    # DuckDB writes NaN and Infinity into JSON, which no JSON reader takes: null, as for a
    # float; a number is written with its exact digits.
    sql = (
        "SELECT json_object('r', 'inf'::DOUBLE, 'x', 'nan'::FLOAT) AS j, "
        "'12345678901234567890.123456789'::JSON AS d"
    )
    with duckdb.connect() as con:
        columns, rows = execute(con, sql)
    assert render(columns, rows, "jsonl") == (
        '{"j":{"r":null,"x":null},"d":12345678901234567890.123456789}\n'
    )


def test_map_keys_are_written_as_their_values_are() -> None:
    """A MAP's keys were written with Python's str(): a timestamp key as "2026-11-26
    00:00:00+00:00" (`histogram(date_trunc('day', created_at))`) where every value of it is
    ISO 8601 UTC with Z."""
    import duckdb

    from exporter.analytics.views import execute

    sql = (
        "SELECT MAP {TIMESTAMPTZ '2026-11-26 00:00:00+00': 3, TIMESTAMPTZ '2026-11-27 12:30:00+00':"
        " 4} AS t, MAP {DATE '2026-11-26': 'a'} AS d, MAP {2: 'two'} AS i"
    )
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        columns, rows = execute(con, sql)
    assert render(columns, rows, "jsonl") == (
        '{"t":{"2026-11-26T00:00:00Z":3,"2026-11-27T12:30:00Z":4},"d":{"2026-11-26":"a"},'
        '"i":{"2":"two"}}\n'
    )
    assert render(columns[:1], [r[:1] for r in rows], "csv") == (
        't\n"{""2026-11-26T00:00:00Z"":3,""2026-11-27T12:30:00Z"":4}"\n'
    )


def test_the_table_shows_max_rows_of_the_rows_it_is_given() -> None:
    """`render` caps the table itself (a notebook's or the report's rows, not only the query's,
    which reads no more than it shows): `max_rows` rows, then how many more."""
    rows = [(1,), (2,), (3,)]
    assert render(["n"], rows, "table", max_rows=2) == (
        "n\n-\n1\n2\n(3 rows, 1 more rows not shown: --max-rows 0 shows all)\n"
    )
    assert render(["n"], rows[:2], "table", max_rows=2) == "n\n-\n1\n2\n(2 rows)\n"
