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

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from exporter._errors import ConfigError
from exporter._storage import VERSIONS_SCHEMA

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


def _rfc3339(column: pa.ChunkedArray) -> list[str | None]:
    """UTC timestamps as RFC 3339 text: whole seconds as `...:04Z`, else `...:04.214837Z`."""
    text = pc.strftime(column, format="%Y-%m-%dT%H:%M:%S")
    text = pc.replace_substring_regex(text, pattern=r"\.000000$", replacement="")
    return pc.binary_join_element_wise(text, pa.scalar("Z"), "").to_pylist()


def event_bodies(table: pa.Table, project_name: str | None) -> list[tuple[str, str, bytes]]:
    """(event id, operation id, event JSON) for each row of a versions table (PRODUCT.md,
    "Events": the row's columns under the API's names plus the names where known)."""
    columns: dict[str, list[Any]] = {}
    for f in VERSIONS_SCHEMA:
        if f.name in _TIMESTAMPS:
            columns[f.name] = _rfc3339(table[f.name])
        elif f.name == "created_date":
            columns[f.name] = table[f.name].cast(pa.string()).to_pylist()
        else:
            columns[f.name] = table[f.name].to_pylist()
    names = list(columns)
    out = []
    for values in zip(*columns.values()):
        data = dict(zip(names, values))
        data["project_name"] = project_name
        # Filled once branch and endpoint names are recorded (issue 21).
        data["branch_name"] = None
        data["endpoint_name"] = None
        op_id, version = data["id"], data["version"]
        event_id = f"{op_id}:{version}"
        event = {
            "id": event_id,
            "type": "operation.created" if version == 1 else "operation.changed",
            "timestamp": data["observed_at"],
            "data": data,
        }
        out.append((event_id, op_id, orjson.dumps(event)))
    return out


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

    def delivered_through(self, sink: str, seq: int) -> int:
        """Every event up to `seq` reached `sink` (the file: appended in order)."""
        column = _COLUMN[sink]
        with self.state.transaction() as con:
            n = con.execute(
                f"UPDATE events SET {column} = 0 WHERE {column} = 1 AND seq <= ?", (seq,)
            ).rowcount
            self._settle(con, sink, n)
        return n

    def delivered(self, sink: str, seqs: Sequence[int]) -> int:
        """These events reached `sink` (the webhook: acknowledged, in any order across
        operations)."""
        column = _COLUMN[sink]
        with self.state.transaction() as con:
            n = 0
            for i in range(0, len(seqs), 500):
                part = seqs[i : i + 500]
                n += con.execute(
                    f"UPDATE events SET {column} = 0 WHERE {column} = 1 AND seq IN "
                    f"({','.join('?' * len(part))})",
                    tuple(part),
                ).rowcount
            self._settle(con, sink, n)
        return n

    def _settle(self, con: sqlite3.Connection, sink: str, n: int) -> None:
        con.execute("DELETE FROM events WHERE to_file = 0 AND to_webhook = 0")
        con.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
            "value = CAST(value AS INTEGER) + excluded.value",
            (f"events_delivered_{sink}", n),
        )

    def backlog(self) -> Backlog:
        return read_backlog(self.state)
