"""Names, not ids (PRODUCT.md): branches, compute endpoints and projects as their listings show
them, with their history. This module declares what is kept, once per kind and per table:

- `Kind`: a listed thing and its *tracked* fields (a change of one is a new version); the
  listings' counters and live state (`current_state`, `logical_size`, `cpu_used_sec`, ...) change
  on almost every read and are never versioned.
- `TABLES`: the five tables exported from the state after a run (`branches`, `endpoints`,
  `branch_versions`, `endpoint_versions`, `project_versions`), each with its columns.

The state (`store.state.StateDB`) keeps the versions; `store.local.exports` writes these tables from it. Nothing
here imports pyarrow at module level: the state and the read-only commands import this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import pyarrow as pa

# Column types, as words (mapped to Arrow in `arrow_type`): `json` is a nested value kept as text.
STRING, BOOL, INT, FLOAT, TIMESTAMP, JSON = "string", "bool", "int", "float", "timestamp", "json"


@dataclass(frozen=True)
class Kind:
    """A listed thing: its key in the state and its tracked fields (name, type)."""

    key: str  # 'branch' | 'endpoint' | 'project'
    tracked: tuple[tuple[str, str], ...]

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.tracked)

    def tracked_json(self, obj: dict[str, Any]) -> str:
        """The tracked fields of a listing object as canonical JSON: equal text, same state."""
        return orjson.dumps(
            {name: obj.get(name) for name in self.field_names}, option=orjson.OPT_SORT_KEYS
        ).decode()

    def same_state(self, tracked: str, obj: dict[str, Any]) -> bool:
        """Whether a listing object says what `tracked` (an earlier `tracked_json`) said, its
        values spelled differently or not: `1` and `1.0`, `...Z` and `...+00:00` are one state,
        not a new version."""
        before = orjson.loads(tracked)
        return all(
            _meaning(word, before.get(name)) == _meaning(word, obj.get(name))
            for name, word in self.tracked
        )


def _meaning(word: str, value: Any) -> Any:
    """A tracked value as compared: a number by its value (never equal to a bool, as Python's
    `True == 1` has it), a time by its instant, JSON by its members' meanings."""
    if isinstance(value, bool) or value is None:
        return (BOOL, value)
    if isinstance(value, (int, float)):
        return (FLOAT, value)  # 1 == 1.0
    if isinstance(value, str):
        if word == TIMESTAMP:
            from exporter.core.timeutil import to_micros  # the state's commands stay light

            try:
                return (TIMESTAMP, to_micros(value))
            except ValueError:
                pass
        return (STRING, value)
    if isinstance(value, dict):
        return (JSON, {k: _meaning(JSON, v) for k, v in value.items()})
    if isinstance(value, list):
        return (JSON, [_meaning(JSON, v) for v in value])
    return (JSON, value)


BRANCH = Kind(
    "branch",
    (
        ("name", STRING),
        ("parent_id", STRING),
        ("default", BOOL),
        ("protected", BOOL),
        ("expires_at", TIMESTAMP),
    ),
)
ENDPOINT = Kind(
    "endpoint",
    (
        ("name", STRING),
        ("branch_id", STRING),
        ("type", STRING),
        ("autoscaling_limit_min_cu", FLOAT),
        ("autoscaling_limit_max_cu", FLOAT),
        ("suspend_timeout_seconds", INT),
        ("disabled", BOOL),
        ("pooler_enabled", BOOL),
    ),
)
# The projects listing is read in every run anyway: its settings are versioned at no request.
PROJECT = Kind(
    "project",
    (
        ("name", STRING),
        ("region_id", STRING),
        ("pg_version", INT),
        ("provisioner", STRING),
        ("org_id", STRING),
        ("default_endpoint_settings", JSON),
        ("settings", JSON),
        ("history_retention_seconds", INT),
        ("store_passwords", BOOL),
    ),
)
LISTED = (BRANCH, ENDPOINT)  # the two listings read per project


@dataclass(frozen=True)
class Listings:
    """One project's branches and endpoints as read together (a walk's last chunk)."""

    observed_us: int
    objects: dict[str, list[dict[str, Any]]]  # Kind.key -> the listing's objects
    unknown: frozenset[str] = frozenset()  # ids operations named before this read


def created_by(obj: dict[str, Any]) -> str | None:
    """The creator's name when the listing gives one (`created_by: {name, image}`)."""
    who = obj.get("created_by")
    if isinstance(who, dict):
        name = who.get("name")
        return name if isinstance(name, str) and name else None
    return who if isinstance(who, str) and who else None


@dataclass(frozen=True)
class Table:
    """One exported table: its name (= its view), the kind it holds, its columns in order."""

    name: str
    kind: Kind
    versions: bool  # True: every version (valid_from/valid_to); False: one row per id
    columns: tuple[tuple[str, str], ...]

    @property
    def file(self) -> str:
        return f"{self.name}/{self.name}.parquet"


_SEEN = (("first_seen_at", TIMESTAMP), ("last_seen_at", TIMESTAMP), ("deleted_at", TIMESTAMP))
_VALID = (("valid_from", TIMESTAMP), ("valid_to", TIMESTAMP))


def _versions_table(name: str, kind: Kind, key: tuple[tuple[str, str], ...]) -> Table:
    return Table(name, kind, True, (*key, ("version", INT), *kind.tracked, *_VALID))


TABLES = (
    Table(
        "branches",
        BRANCH,
        False,
        (
            ("id", STRING),
            ("project_id", STRING),
            ("name", STRING),
            ("parent_id", STRING),
            ("default", BOOL),
            ("protected", BOOL),
            ("created_at", TIMESTAMP),
            ("created_by", STRING),
            *_SEEN,
        ),
    ),
    Table(
        "endpoints",
        ENDPOINT,
        False,
        (
            ("id", STRING),
            ("project_id", STRING),
            ("branch_id", STRING),
            ("name", STRING),
            ("type", STRING),
            ("autoscaling_limit_min_cu", FLOAT),
            ("autoscaling_limit_max_cu", FLOAT),
            ("suspend_timeout_seconds", INT),
            ("created_at", TIMESTAMP),
            *_SEEN,
        ),
    ),
    _versions_table("branch_versions", BRANCH, (("id", STRING), ("project_id", STRING))),
    _versions_table("endpoint_versions", ENDPOINT, (("id", STRING), ("project_id", STRING))),
    _versions_table("project_versions", PROJECT, (("id", STRING),)),
)
TABLE_FILES = {t.name: t.file for t in TABLES}
# The state's meta key: the names generation (`StateDB.names_generation`) the tables were last
# written from (locally after a run, `store.local.exports`; on object storage with the commit
# whose state it is in, `store.lake.store`).
EXPORTED_META = "names_exported"


def arrow_type(word: str) -> pa.DataType:
    import pyarrow as pa

    # pyarrow (UTC_US is Arrow's type): the state, status and the CLI import this module without it
    from exporter.core.timeutil import UTC_US

    return {
        STRING: pa.string(),
        JSON: pa.string(),
        BOOL: pa.bool_(),
        INT: pa.int64(),
        FLOAT: pa.float64(),
        TIMESTAMP: UTC_US,
    }[word]


def schema(table: Table) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(name, arrow_type(word)) for name, word in table.columns])


def _typed(word: str, values: Sequence[Any]) -> pa.Array:
    """One column from JSON values; a value of the wrong type is NULL (it stays in the JSON)."""
    import pyarrow as pa

    from exporter.core.timeutil import to_micros  # beside pyarrow, as above

    def keep(v: Any) -> Any:
        if v is None:
            return None
        if word == STRING:
            return v if isinstance(v, str) else None
        if word == JSON:
            return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        if word == BOOL:
            return v if isinstance(v, bool) else None
        if word == INT:
            ok = isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63
            return v if ok else None
        if word == FLOAT:
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if isinstance(v, int) and not isinstance(v, bool):  # TIMESTAMP: micros from the state
            return v
        try:
            return to_micros(v) if isinstance(v, str) else None
        except ValueError:
            return None

    cleaned = [keep(v) for v in values]
    if word == TIMESTAMP:
        return pa.array(cleaned, type=pa.int64()).cast(arrow_type(TIMESTAMP))
    return pa.array(cleaned, type=arrow_type(word))


def to_arrow(table: Table, rows: Iterable[dict[str, Any]]) -> pa.Table:
    """`rows` (dicts of the table's columns; tracked fields as the API gave them, times as
    microseconds or RFC 3339) as an Arrow table of the declared schema."""
    import pyarrow as pa

    materialized = list(rows)
    return pa.Table.from_arrays(
        [_typed(word, [r.get(name) for r in materialized]) for name, word in table.columns],
        schema=schema(table),
    )


__all__ = [
    "BRANCH",
    "ENDPOINT",
    "EXPORTED_META",
    "LISTED",
    "PROJECT",
    "TABLES",
    "TABLE_FILES",
    "Kind",
    "Listings",
    "Table",
    "created_by",
    "schema",
    "to_arrow",
]
