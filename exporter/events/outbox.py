"""The events outbox (issue 22): one event per new `operation_versions` row, recorded in the
state transaction that commits the row, delivered after the commit (`exporter.events.delivery`).

A transactional outbox: the committer calls `Outbox.record` inside the very transaction that
registers the rows' files and numbers their versions (on object storage: the state that is
uploaded with the rows in one Delta commit), so a kill at any instant neither loses an event nor
invents one. Each event is fixed at commit, so every delivery attempt sends the same bytes under
the same id: a local store's outbox row holds the events' ids and the facts their JSON is built
from besides the committed rows (the run, the names as known at commit), and delivery builds the
JSON from those rows (`Outbox.pending`); the JSON itself never goes through the state, which cost
a backfill with --events-backfill ~2 µs per event (bench/README.md, figure 9). A store that cannot
read its rows back cheaply (object storage) keeps the JSON in the row. A row stays until every
sink it was recorded for took it; the rows are the backlog that `status`, `check` and the metrics
report. Owned here: the `event_batches` table and the state's `events_delivered_*` counters.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from exporter.core.errors import StorageError
from exporter.events.config import (
    DONE_SQL,
    SINKS,
    WAITING_SQL,
    Backlog,
    EventFilter,
    EventsConfig,
    parse_event_filter,
    read_backlog,
)
from exporter.events.render import COLUMNS, event_ids, event_lines_buffer
from exporter.store.base import VersionsReader

__all__ = [
    "SINKS",
    "Backlog",
    "Batch",
    "EventFilter",
    "EventsConfig",
    "Outbox",
    "parse_event_filter",
    "read_backlog",
]

# What an outbox row needs of its events' rows at commit when the JSON is built from the
# committed rows: the ids, and what the names in effect are looked up by.
_KEYS = ["id", "version", "branch_id", "endpoint_id", "created_at"]
ROW_EVENTS = 20_000  # events per outbox row at most (its JSON, ~11 MB, is built whole)
PIECE_EVENTS = 10_000  # events per piece the events file's follower builds (`Outbox.pieces`)
_COLUMN = {"file": "to_file", "webhook": "to_webhook"}


@dataclass
class Batch:
    """One row of the outbox: the events of one commit, in order."""

    seq: int
    ids_blob: bytes  # newline-separated
    blob: bytes  # the JSON Lines, each line ending in a newline (b"" when built from `facts`)
    file_done: int | None  # None: not for the file
    acked: bytearray | None  # None: not for the webhook; else 1 per acknowledged event
    facts: bytes | None = None  # what `blob` is built from besides the rows (`Outbox.build`)
    rows: pa.Table | None = None  # the events' rows as the commit had them (`Outbox.keep`)
    # With `rows`: each event's project, branch and endpoint name, as `facts` holds them.
    names: tuple[pa.Array, pa.Array, pa.Array] | None = None

    @functools.cached_property
    def ids(self) -> list[str]:
        return self.ids_blob.decode().split("\n")

    @functools.cached_property
    def lines(self) -> list[bytes]:
        """Each event's JSON, without the newline."""
        return self.blob.split(b"\n")[:-1]

    def file_data(self) -> bytes:
        """What the file still lacks of this batch (all of it, unless a kill cut an append)."""
        if not self.file_done:
            return self.blob
        return b"".join(line + b"\n" for line in self.lines[self.file_done :])


class _Facts(msgspec.Struct, array_like=True):
    """What a batch's JSON is built from besides its committed rows (`event_batches.facts`)."""

    run_id: str  # the rows' run_id
    projects: list[tuple[str | None, int]]  # (project name, how many events), in order
    branches: list[str | None]  # per event: the branch's name in effect at commit
    endpoints: list[str | None]


_FACTS = msgspec.json.Encoder()
_FACTS_DECODER = msgspec.json.Decoder(_Facts)


def _run_names(projects: Sequence[tuple[str | None, int]]) -> pa.Array:
    """Each event's project name, from (name, how many events) runs."""
    if not projects:
        return pa.array([], pa.string())
    return pa.concat_arrays([pa.repeat(pa.scalar(p, pa.string()), n) for p, n in projects])


def _lines(
    table: pa.Table,
    projects: Sequence[tuple[str | None, int]],
    branches: list[str | None],
    endpoints: list[str | None],
) -> pa.Buffer:
    """The JSON Lines of a commit's events (`table`: their rows, in order), in Arrow's buffer."""
    return event_lines_buffer(table, _run_names(projects), branches, endpoints)


def _runs_slice(
    runs: Sequence[tuple[str | None, int]], start: int, n: int
) -> list[tuple[str | None, int]]:
    """The (value, count) runs of the `n` items from `start` of the items `runs` describe."""
    out: list[tuple[str | None, int]] = []
    at = 0
    for value, count in runs:
        take = min(at + count, start + n) - max(at, start)
        if take > 0:
            out.append((value, take))
        at += count
    return out


def _bytes(value: bytes | str) -> bytes:
    """A BLOB column's value (the migration from format 5 made some TEXT: `||` yields text)."""
    return value.encode() if isinstance(value, str) else bytes(value)


class Outbox:
    """The outbox of one run: records events in the committer's transaction, hands pending
    ones to the sinks in commit order and marks them delivered."""

    def __init__(self, state: Any, config: EventsConfig, rows: VersionsReader | None = None):
        self.state = state
        self.config = config
        self.sinks = config.sinks
        # The committed rows, read back at delivery (None: the outbox keeps the events' JSON).
        self.rows = rows

    # -- inside the committer's transaction --------------------------------------------------

    def keep(self, table: pa.Table | None) -> pa.Table | None:
        """What the outbox needs at commit of `table` (one chunk's new versions): the rows that
        pass --events-filter, only the columns `record` reads (None: no event). Taken before
        the committer writes the rows ahead of their commit (`Store.spill`): the chunk then
        keeps these columns only, a few dozen bytes per event, not its rows."""
        if not self.sinks or table is None or not table.num_rows:
            return None
        for f in self.config.filters:
            table = table.filter(f.mask(table))
        return table.select(self.columns) if table.num_rows else None

    @property
    def columns(self) -> list[str]:
        """The columns kept for `record`: the ids and what the names are looked up by, unless
        the JSON is built right after the commit (the events file follows the commits: from
        the rows in hand, not read back) or kept in the outbox (no `rows` to build it from)."""
        return _KEYS if self.rows is not None and "file" not in self.sinks else COLUMNS

    def select(
        self, con: sqlite3.Connection, project_id: str, kept: pa.Table | None
    ) -> list[tuple[pa.Table, str | None]]:
        """The `keep`t rows of one project's chunk that make events, with the project's name:
        none in the project's first walk unless --events-backfill. In the caller's open
        transaction, before the chunk's own state changes (a completed first walk would
        otherwise no longer look like a backfill)."""
        if kept is None or not kept.num_rows:
            return []
        row = con.execute(
            "SELECT name, last_synced_us FROM projects WHERE id = ?", (project_id,)
        ).fetchone()
        name, synced = row if row is not None else (None, None)
        if synced is None and not self.config.backfill:
            return []  # the project's first walk (PRODUCT.md: no events unless --events-backfill)
        return [(kept, name)]

    def record(
        self,
        con: sqlite3.Connection,
        selected: Sequence[tuple[pa.Table, str | None]],
        now: int,
        run_id: str,
    ) -> list[Batch]:
        """Record the `select`ed events of one commit (rows of run `run_id`), in order, as
        outbox rows of at most ROW_EVENTS events, in the transaction that commits their rows
        (after the chunks' listings: the names). Returns those rows; a local store's hold the
        facts their JSON is built from after the commit (`build`), others' their JSON."""
        selected = [(t, name) for t, name in selected if t.num_rows]
        if not selected:
            return []
        # Not combined: a row's part is, when its JSON is built (a copy of a row's columns, not
        # of the whole commit's, next to the chunks' own).
        table = pa.concat_tables([t.select(self.columns) for t, _ in selected])
        projects = [(name, t.num_rows) for t, name in selected]
        # The names in effect when each operation was created, as the state knows them in
        # this transaction (PRODUCT.md: "where known"; the views join the same versions).
        branches, endpoints = (
            self._names(con, kind, table, column)
            for kind, column in (("branch", "branch_id"), ("endpoint", "endpoint_id"))
        )
        project_names = _run_names(projects)
        webhook = "webhook" in self.sinks
        file_done = 0 if "file" in self.sinks else None
        out: list[Batch] = []
        # Rows of a bounded size: a commit of rows written ahead holds up to spill_rows
        # versions, and each row's JSON is built whole when it is delivered.
        for start in range(0, table.num_rows, ROW_EVENTS):
            part = table.slice(start, ROW_EVENTS)
            n = part.num_rows
            runs = _runs_slice(projects, start, n)
            names = tuple(a.slice(start, n) for a in (project_names, branches, endpoints))
            ids = event_ids(part)
            lines, facts = b"", None
            if self.rows is None:
                lines = event_lines_buffer(part.combine_chunks(), *names).to_pybytes()
            else:
                # The rows are committed with this row: the JSON is built from them and these
                # facts when needed (`pieces`, `build`).
                part_branches, part_endpoints = (a.to_pylist() for a in names[1:])
                facts = _FACTS.encode(_Facts(run_id, runs, part_branches, part_endpoints))
            acks = (n, bytes(n)) if webhook else (None, None)  # webhook_left, webhook_acked
            cursor = con.execute(
                "INSERT INTO event_batches (recorded_us, events, ids, lines, file_done, "
                "webhook_left, webhook_acked, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (now, n, ids, lines, file_done, *acks, facts),
            )
            assert cursor.lastrowid is not None
            batch = Batch(cursor.lastrowid, ids, lines, file_done, None, facts)
            if facts is not None and "file" in self.sinks:  # the follower builds it now
                batch.rows, batch.names = part, names
            out.append(batch)
        return out

    def pieces(self, batch: Batch) -> list[Callable[[], bytes | pa.Buffer]]:
        """The JSON Lines of a batch `record` returned, in order, as builders of consecutive
        pieces (each in Arrow's buffer, written as is: a copy of 40 MB per 71k events saved):
        built from the rows and names it keeps (the same bytes as built later from the
        committed rows and its facts, `build`), PIECE_EVENTS events a piece: the events
        file's follower holds one piece's JSON and its parts at a time (bench/README.md,
        figure 9: peak RSS of an events backfill ~5 MiB lower than with 20,000)."""
        if batch.facts is None:
            return [lambda: batch.blob]
        rows, names = batch.rows, batch.names
        if rows is None or names is None:
            return [lambda: self.build(batch.ids_blob, batch.facts or b"")]

        def piece(start: int) -> pa.Buffer:
            return event_lines_buffer(*self._piece_rows(rows, names, start))

        return [functools.partial(piece, s) for s in range(0, rows.num_rows, PIECE_EVENTS)]

    def piece_rows(self, batch: Batch) -> list[tuple[pa.Table, pa.Array, pa.Array, pa.Array]]:
        """What `pieces` builds each piece from (its rows and their three names), for a batch
        that keeps its rows; else nothing (`pieces` then builds it from the state)."""
        rows, names = batch.rows, batch.names
        if batch.facts is None or rows is None or names is None:
            return []
        return [self._piece_rows(rows, names, s) for s in range(0, rows.num_rows, PIECE_EVENTS)]

    @staticmethod
    def _piece_rows(
        rows: pa.Table, names: tuple[pa.Array, pa.Array, pa.Array], start: int
    ) -> tuple[pa.Table, pa.Array, pa.Array, pa.Array]:
        part = rows.slice(start, PIECE_EVENTS).combine_chunks()
        project, branch, endpoint = (a.slice(start, PIECE_EVENTS) for a in names)
        return part, project, branch, endpoint

    def _names(self, con: sqlite3.Connection, kind: str, table: pa.Table, column: str) -> pa.Array:
        """`StateDB.names_in_effect` of each row's id in `column` and its created_at: per
        distinct id when every id has one name for all time (one version, or never listed: a
        few hundred lookups for a commit's rows instead of one per row), else row by row."""
        encoded = table[column].combine_chunks().dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        spans = self.state.name_spans(con, kind, distinct)
        constant: list[str | None] = []
        for name_id in distinct:
            versions = spans.get(name_id, [])
            if len(versions) > 1 or (versions and versions[0][1] is not None):
                created = pc.cast(table["created_at"], pa.int64()).to_pylist()
                wanted = list(zip(table[column].to_pylist(), created))
                return pa.array(self.state.names_in_effect(con, kind, wanted), pa.string())
            constant.append(versions[0][2] if versions else None)
        return pc.take(pa.array(constant, pa.string()), encoded.indices)

    def build(self, ids: bytes, facts: bytes) -> bytes:
        """The JSON Lines of a batch recorded with `facts`: its committed rows (found by run
        and (id, version), wherever compaction moved them), in the batch's order, with the
        names recorded at commit: the same bytes as built at commit."""
        if self.rows is None:
            raise StorageError(
                "the outbox holds events whose JSON is built from the committed rows, and "
                "this store cannot read them"
            )
        f = _FACTS_DECODER.decode(facts)
        wanted = pa.array(ids.decode().split("\n"), pa.string())
        operations = {event_id.rpartition(":")[0] for event_id in wanted.to_pylist()}
        found = self.rows(f.run_id, sorted(operations), COLUMNS).combine_chunks()
        keys = pc.binary_join_element_wise(
            found["id"], pa.scalar(":"), pc.cast(found["version"], pa.string()), ""
        )
        index = pc.index_in(wanted, value_set=keys)
        if index.null_count:
            raise StorageError(
                f"{index.null_count} event(s) of the outbox have no committed row in run "
                f"{f.run_id}: the dataset was changed outside opsaudit"
            )
        return _lines(found.take(index), f.projects, f.branches, f.endpoints).to_pybytes()

    # -- delivery ----------------------------------------------------------------------------

    def pending(self, sink: str, after: int = 0, limit: int = 1000) -> list[Batch]:
        """Batches with events waiting for `sink`, in commit order, from after seq `after`,
        until they hold at least `limit` events."""
        waiting = f"{WAITING_SQL[sink]} > 0"
        out: list[Batch] = []
        count = 0
        while count < limit:
            rows = self.state.query(
                "SELECT seq, ids, lines, file_done, webhook_acked, facts FROM event_batches "
                f"WHERE {waiting} AND seq > ? ORDER BY seq LIMIT 16",
                (after,),
            )
            for seq, ids, lines, file_done, acked, facts in rows:
                ids = _bytes(ids)
                batch = Batch(
                    seq,
                    ids,
                    _bytes(lines) if facts is None else self.build(ids, facts),
                    file_done,
                    None if acked is None else bytearray(acked),
                )
                out.append(batch)
                count += batch.ids_blob.count(b"\n") + 1
                after = seq
                if count >= limit:
                    break
            if len(rows) < 16:
                break
        return out

    def find_pending_file(self, event_id: str) -> tuple[int | None, int]:
        """(seq, index) of an event not yet marked appended to the file, or (None, 0)."""
        needle = event_id.encode()
        after = 0
        while rows := self.state.query(
            "SELECT seq, ids, file_done FROM event_batches WHERE file_done < events AND seq > ? "
            "ORDER BY seq LIMIT 64",
            (after,),
        ):
            for seq, ids, file_done in rows:
                ids = _bytes(ids)
                if needle in ids:
                    ids_list = ids.split(b"\n")
                    if needle in ids_list and ids_list.index(needle) >= file_done:
                        return seq, ids_list.index(needle)
                after = seq
        return None, 0

    def delivered_through(
        self, sink: str, seq: int, after: int = 0, done: int | None = None
    ) -> int:
        """The file has every event of the batches after `after` up to `seq` (appended in
        order); with `done`, only the first `done` events of batch `seq`. Returns how many
        events that marks."""
        assert sink == "file"
        with self.state.transaction() as con:
            return self.mark_file(con, seq, after, done)

    def mark_file(
        self, con: sqlite3.Connection, seq: int, after: int = 0, done: int | None = None
    ) -> int:
        """`delivered_through` for the file, in the caller's open transaction."""
        [(n,)] = con.execute(
            "SELECT coalesce(sum(events - file_done), 0) FROM event_batches "
            "WHERE seq > ? AND seq <= ? AND file_done < events",
            (after, seq),
        ).fetchall()
        # Rows no other sink waits for are deleted outright (an update would rewrite them).
        con.execute(
            "DELETE FROM event_batches WHERE seq > ? AND seq <= ? AND file_done < events "
            "AND (webhook_left IS NULL OR webhook_left = 0)"
            + ("" if done is None else " AND seq < ?"),
            (after, seq) if done is None else (after, seq, seq),
        )
        con.execute(
            "UPDATE event_batches SET file_done = events "
            "WHERE seq > ? AND seq <= ? AND file_done < events",
            (after, seq),
        )
        if done is not None:
            [(events,)] = con.execute(
                "SELECT events FROM event_batches WHERE seq = ?", (seq,)
            ).fetchall()
            n -= events - done
            con.execute("UPDATE event_batches SET file_done = ? WHERE seq = ?", (done, seq))
        con.execute(
            f"DELETE FROM event_batches WHERE seq > ? AND seq <= ? AND {DONE_SQL}", (after, seq)
        )
        self._count(con, "file", n)
        return int(n)

    def delivered(self, sink: str, acked: Sequence[Batch]) -> int:
        """The webhook acknowledged the events flagged in these batches' `acked`. Returns how
        many newly."""
        assert sink == "webhook"
        n = 0
        with self.state.transaction() as con:
            for batch in acked:
                assert batch.acked is not None
                left = batch.acked.count(0)
                row = con.execute(
                    "SELECT webhook_left FROM event_batches WHERE seq = ?", (batch.seq,)
                ).fetchone()
                if row is None or row[0] is None or row[0] == left:
                    continue  # (nothing new since the last save: no write)
                n += row[0] - left
                con.execute(
                    "UPDATE event_batches SET webhook_left = ?, webhook_acked = ? WHERE seq = ?",
                    (left, bytes(batch.acked), batch.seq),
                )
                con.execute(f"DELETE FROM event_batches WHERE seq = ? AND {DONE_SQL}", (batch.seq,))
            if n:
                self._count(con, sink, n)
        return n

    @staticmethod
    def _count(con: sqlite3.Connection, sink: str, n: int) -> None:
        con.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
            "value = CAST(value AS INTEGER) + excluded.value",
            (f"events_delivered_{sink}", n),
        )

    def backlog(self) -> Backlog:
        return read_backlog(self.state)
