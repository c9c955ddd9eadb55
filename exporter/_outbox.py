"""The events outbox (issue 22): one event per new `operation_versions` row, recorded in the
state transaction that commits the row, delivered after the commit (`exporter._delivery`).

A transactional outbox: the committer calls `Outbox.record` inside the very transaction that
registers the rows' files and numbers their versions (on object storage: the state that is
uploaded with the rows in one Delta commit), so a kill at any instant neither loses an event nor
invents one. Each event is fixed at commit (its JSON is stored), so every delivery attempt sends
the same bytes under the same id. A row stays until every sink it was recorded for took it; the
rows are the backlog that `status`, `check` and the metrics report.

This module owns the `events` table and the `events_delivered_*` meta counters of the state.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from exporter._errors import ConfigError

__all__ = [
    "SINKS",
    "Backlog",
    "EventFilter",
    "EventsConfig",
    "Outbox",
    "event_bodies",
    "parse_event_filter",
    "read_backlog",
]

SINKS = ("file", "webhook")
_COLUMN = {"file": "to_file", "webhook": "to_webhook"}
_TIMESTAMPS = ("retry_at", "created_at", "updated_at", "observed_at")
# An event's `data`: the operation_versions columns that carry the API's fields, and `version`.
_DATA_FIELDS = (
    "id",
    "project_id",
    "branch_id",
    "endpoint_id",
    "action",
    "status",
    "failures_count",
    "error",
    "retry_at",
    "created_at",
    "updated_at",
    "total_duration_ms",
    "version",
)


@dataclass(frozen=True)
class EventFilter:
    """One `--events-filter`: `field=v1,v2` keeps events whose field is one of the values,
    `field!=v1,v2` drops them. Fields: `action`, `status`."""

    text: str
    field: str
    negate: bool
    values: frozenset[str]

    def mask(self, table: pa.Table) -> pa.ChunkedArray:
        hit = pc.fill_null(
            pc.is_in(table[self.field], value_set=pa.array(sorted(self.values), pa.string())),
            False,
        )
        return pc.invert(hit) if self.negate else hit


_FILTER = re.compile(r"^\s*(action|status)\s*(!=|=)\s*([^=!]+)$")


def parse_event_filter(text: str) -> EventFilter:
    """Parse `action=start_compute,suspend_compute` or `status!=finished`; `ConfigError` else."""
    m = _FILTER.match(text)
    values = frozenset(v.strip() for v in m[3].split(",") if v.strip()) if m else frozenset()
    if not m or not values:
        raise ConfigError(
            f"--events-filter {text!r} is not a filter: write FIELD=V1,V2 or FIELD!=V1,V2 with "
            "FIELD action or status (e.g. status=failed,error)"
        )
    return EventFilter(text.strip(), m[1], m[2] == "!=", values)


@dataclass
class EventsConfig:
    """Where a run's events go (the CLI builds it from `--events-file`, `--webhook`, ...)."""

    file: Path | None = None  # JSON Lines, appended
    webhook_url: str | None = field(default=None, repr=False)  # its query may hold a token
    webhook_key: bytes | None = field(default=None, repr=False)  # the decoded whsec_ secret
    backfill: bool = False  # also the rows of a project's first walk
    filters: Sequence[EventFilter] = ()  # all must hold
    webhook_timeout: float = 10.0  # seconds per attempt
    webhook_attempts: int = 6  # per event and run: 0.5 + 1 + 2 + 4 + 8 s of backoff between them
    webhook_backoff: float = 0.5  # the first wait; doubles, at most 30 s
    webhook_lanes: int = 4  # events in flight at once (one operation's always in one lane)

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(
            s for s, on in (("file", self.file is not None), ("webhook", self.webhook_url)) if on
        )


def _rfc3339(column: pa.ChunkedArray) -> pa.Array:
    """UTC timestamps as RFC 3339 text: whole seconds as `...:04Z`, else `...:04.214837Z`."""
    text = pc.strftime(column, format="%Y-%m-%dT%H:%M:%S")
    text = pc.replace_substring_regex(text, pattern=r"\.000000$", replacement="")
    return pc.binary_join_element_wise(text, pa.scalar("Z"), "")


_STRINGS = frozenset({"id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"})


def _json_strings(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value as a JSON string literal (`"..."`), NULL as `null`, computed by Arrow."""
    text = pc.replace_substring(column, "\\", "\\\\")
    text = pc.replace_substring(text, '"', '\\"')
    controls = pc.fill_null(pc.match_substring_regex(column, "[\\x00-\\x1f]"), False)
    if pc.any(controls).as_py():
        # Rare (an error text with a newline): those values through the JSON encoder.
        exact = [
            _ENCODER.encode(v).decode()[1:-1] if flag and v is not None else None
            for v, flag in zip(column.to_pylist(), controls.to_pylist())
        ]
        text = pc.if_else(controls, pa.array(exact, pa.string()), text)
    quoted = pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")
    return pc.fill_null(quoted, "null")


def _json_values(table: pa.Table, name: str) -> pa.Array:
    if name in _STRINGS:
        return _json_strings(table[name])
    if name in _TIMESTAMPS:
        return _json_strings(_rfc3339(table[name]))
    return pc.fill_null(pc.cast(table[name], pa.string()), "null")  # integers


_ENCODER = msgspec.json.Encoder()


def event_bodies(table: pa.Table, project_name: str | None) -> list[tuple[str, str, bytes]]:
    """(event id, operation id, event JSON) for each row of a versions table (PRODUCT.md,
    "Events": the row's columns under the API's names, its version, and the names where
    known). Not `raw` and the bookkeeping columns: they tripled an event's size, and with it
    the cost of a backfill with `--events-backfill`. The JSON text is assembled column by column
    by Arrow, not object by object in Python: a fraction of the CPU per event (bench/README.md).
    """
    version = pc.cast(table["version"], pa.string())
    event_ids = pc.binary_join_element_wise(table["id"], pa.scalar(":"), version, "")
    kinds = pc.if_else(
        pc.equal(table["version"], 1), pa.scalar("operation.created"), "operation.changed"
    )
    # branch_name / endpoint_name: filled once those names are recorded (issue 21).
    names = (
        f',"project_name":{_ENCODER.encode(project_name).decode()},'
        '"branch_name":null,"endpoint_name":null}}'
    )
    parts: list[Any] = [
        '{"id":',
        _json_strings(event_ids),
        ',"type":"',
        kinds,
        '","timestamp":',
        _json_strings(_rfc3339(table["observed_at"])),
        ',"data":{',
    ]
    for n, name in enumerate(_DATA_FIELDS):
        parts += [f'{"," if n else ""}"{name}":', _json_values(table, name)]
    parts.append(names)
    lines = pc.binary_join_element_wise(
        *[pa.scalar(p) if isinstance(p, str) else p for p in parts], ""
    )
    return list(
        zip(
            event_ids.to_pylist(),
            table["id"].to_pylist(),
            pc.cast(lines, pa.binary()).to_pylist(),
        )
    )


@dataclass(frozen=True)
class Backlog:
    """Events waiting, per sink, and the age mark of the oldest one."""

    pending: dict[str, int]  # sink -> events not yet delivered there
    oldest_us: int | None  # recorded_us of the oldest waiting event
    delivered: dict[str, int]  # sink -> events delivered over the dataset's life

    @property
    def total(self) -> int:
        """Events waiting for at least one sink."""
        return max(self.pending.values(), default=0)


def read_backlog(state: Any) -> Backlog:
    """The backlog of a `StateDB` (a read-only one too; a state from before the outbox has
    none)."""
    delivered = {
        s: int(v[0][0])
        if (v := state.query("SELECT value FROM meta WHERE key = ?", (f"events_delivered_{s}",)))
        else 0
        for s in SINKS
    }
    if not state.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"):
        return Backlog({s: 0 for s in SINKS}, None, delivered)
    to_file, to_webhook, oldest = state.query(
        "SELECT coalesce(sum(to_file), 0), coalesce(sum(to_webhook), 0), min(recorded_us) "
        "FROM events"
    )[0]
    return Backlog({"file": int(to_file), "webhook": int(to_webhook)}, oldest, delivered)


class Outbox:
    """The outbox of one run: records events in the committer's transaction, hands pending
    ones to the sinks in commit order and marks them delivered."""

    def __init__(self, state: Any, config: EventsConfig):
        self.state = state
        self.config = config
        self.sinks = config.sinks

    # -- inside the committer's transaction --------------------------------------------------

    def record(self, con: sqlite3.Connection, project_id: str, table: pa.Table, now: int) -> int:
        """Record the events of `table` (one project's new versions) in the caller's open
        transaction; call it before the chunk's own state changes (a completed first walk
        would otherwise no longer look like a backfill). Returns how many were recorded."""
        if not self.sinks or table is None or not table.num_rows:
            return 0
        row = con.execute(
            "SELECT name, last_synced_us FROM projects WHERE id = ?", (project_id,)
        ).fetchone()
        name, synced = row if row is not None else (None, None)
        if synced is None and not self.config.backfill:
            return 0  # the project's first walk (PRODUCT.md: no events unless --events-backfill)
        for f in self.config.filters:
            table = table.filter(f.mask(table))
        if not table.num_rows:
            return 0
        to_file = int("file" in self.sinks)
        to_webhook = int("webhook" in self.sinks)
        rows = [
            (event_id, op_id, now, body, to_file, to_webhook)
            for event_id, op_id, body in event_bodies(table, name)
        ]
        con.executemany(
            "INSERT INTO events (id, operation_id, recorded_us, body, to_file, to_webhook) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        return len(rows)

    # -- delivery ----------------------------------------------------------------------------

    def pending(
        self, sink: str, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str, str, bytes]]:
        """(seq, event id, operation id, body) waiting for `sink`, in commit order."""
        return self.state.query(
            f"SELECT seq, id, operation_id, body FROM events WHERE {_COLUMN[sink]} = 1 "
            "AND seq > ? ORDER BY seq LIMIT ?",
            (after, limit),
        )

    def pending_seq(self, sink: str, event_id: str) -> int | None:
        """The seq of a waiting event by id (the events file's reconciliation)."""
        rows = self.state.query(
            f"SELECT max(seq) FROM events WHERE id = ? AND {_COLUMN[sink]} = 1", (event_id,)
        )
        return rows[0][0] if rows else None

    def delivered_through(self, sink: str, seq: int, after: int = 0) -> int:
        """Every event up to `seq` reached `sink` (the file: appended in order); those up to
        `after` are already marked (only the range between is touched)."""
        with self.state.transaction() as con:
            n = self._mark(con, sink, "seq > ? AND seq <= ?", (after, seq))
            self._count(con, sink, n)
        return n

    def delivered(self, sink: str, seqs: Sequence[int]) -> int:
        """These events reached `sink` (the webhook: acknowledged, in any order across
        operations)."""
        with self.state.transaction() as con:
            n = 0
            for i in range(0, len(seqs), 500):
                part = tuple(seqs[i : i + 500])
                n += self._mark(con, sink, f"seq IN ({','.join('?' * len(part))})", part)
            self._count(con, sink, n)
        return n

    @staticmethod
    def _mark(con: sqlite3.Connection, sink: str, where: str, params: tuple[Any, ...]) -> int:
        """Events matching `where` (by primary key) reached `sink`: deleted when no other sink
        waits for them, else flagged. Returns how many were pending for `sink`."""
        column = _COLUMN[sink]
        other = _COLUMN["webhook" if sink == "file" else "file"]
        gone = con.execute(
            f"DELETE FROM events WHERE {where} AND {column} = 1 AND {other} = 0", params
        ).rowcount
        kept = con.execute(
            f"UPDATE events SET {column} = 0 WHERE {where} AND {column} = 1", params
        ).rowcount
        return int(gone + kept)

    @staticmethod
    def _count(con: sqlite3.Connection, sink: str, n: int) -> None:
        con.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
            "value = CAST(value AS INTEGER) + excluded.value",
            (f"events_delivered_{sink}", n),
        )

    def backlog(self) -> Backlog:
        return read_backlog(self.state)
