"""The state database (SQLite): checkpoints, open operations, committed files, runs, the lock.

SQLite gives one atomic, durable commit point for "these Parquet files exist and the checkpoints
moved past them" (DESIGN.md, commit protocol). Timestamps are stored as integer microseconds
since the epoch, UTC.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from exporter.core.errors import (
    AccessDeniedError,
    LockHeldError,
    StoppedError,
    StorageError,
    UnreadableStateError,
    os_storage_error,
)
from exporter.core.layout import fsync_dir
from exporter.core.model import TERMINAL_STATUSES, Chunk, OpenOp, Outcome, ProjectRow, RunRow
from exporter.core.names import LISTED, PROJECT, Kind, Listings, Table, created_by
from exporter.core.timeutil import to_micros

APPLICATION_ID = 0x4F505341  # "OPSA": marks the file as ours (PRAGMA application_id)
# 2: open_ops.misses, projects.walk_tail_ids/listed_in, files.replaced_by (migrated from 1).
# 3: events (the outbox of `exporter.events.outbox`).
# 4: open_ops.changed_us/retry_us (the refresh schedule, exporter/engine/schedule.py).
# 5: events without its three indexes (they doubled the cost of recording an event; the
# outbox is read by primary key range).
# 6: the outbox holds one row per committed batch of events (event_batches), not one per event.
# 7: the superseded record (issue 24): `superseded/` files registered in `files` with the
# versions they follow; an older opsaudit would add versions without it, so it must refuse.
# Migrated by `Dataset.record_superseded` (it reads the Parquet files), not here.
# 8: names (issue 21): named, name_versions, unlisted, projects.names_read_us/names_due.
# 9: event_batches.facts: a batch may hold what its events are built from instead of their JSON
# (an older opsaudit would deliver its empty `lines`, so it must refuse).
# 10: the report's summary record (issue 24): `summary/` files registered in `files` with the
# versions they sum up; an older opsaudit would add versions without it, so it must refuse.
# Migrated by `Dataset.record_summary` (it reads the Parquet files), not here.
# 11: the report's flagged record (issue 24): `flagged/` files (the versions not terminal or with
# an error text) registered in `files` with the versions; an older opsaudit would add versions
# without it, so it must refuse. Migrated by `Dataset.record_flagged`, not here.
# 12: projects.current_us: when a project's trail was last known complete (its last walk, or a
# listing that showed it idle); `check`, `status`, the metrics and the report judge freshness by
# it (a project `--skip-idle` leaves was `project_not_synced` past --max-age).
FORMAT_VERSION = 12
# `--skip-idle`: how far this host's clock may run ahead of the API's before activity marks
# (the API's clock) could read as older than a walk's start (this host's clock).
IDLE_SKEW_US = 60_000_000


# SQL: the tracked operation's project is not marked deleted. A project a complete listing left
# out, or whose operations and own GET answered 404 (`walk.ProjectWalk._not_found`), keeps its
# tracked operations (a listing that shows it again has them re-read; dropped, they kept their
# old state for good), but they are not counted, planned or checked while it is gone.
_LISTED_PROJECT = "project_id NOT IN (SELECT id FROM projects WHERE deleted_us IS NOT NULL)"


def _still_open(column: str = "status") -> str:
    """SQL: the operation whose status is in `column` may still change (unknown ones too)."""
    listed = ", ".join(f"'{status}'" for status in sorted(TERMINAL_STATUSES))
    return f"({column} IS NULL OR {column} NOT IN ({listed}))"


# Run statement by statement, split on ";" (`_create`): no semicolon in a comment.
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    name TEXT, region_id TEXT, pg_version INTEGER, platform_id TEXT, provisioner TEXT,
    org_id TEXT, owner_id TEXT, created_us INTEGER, updated_us INTEGER, raw TEXT,
    first_seen_us INTEGER NOT NULL,
    last_seen_us INTEGER,          -- last listing that showed it
    deleted_us INTEGER,            -- first listing without it, or a 404 on its operations
    last_synced_us INTEGER,        -- last completed walk
    current_us INTEGER,            -- last known complete: its last completed walk, or a later
                                   -- listing that showed no activity (--skip-idle left it)
    last_error TEXT,
    checkpoint_us INTEGER,         -- newest created_at of the last completed walk
    boundary_ids TEXT,             -- JSON list: ids at exactly checkpoint_us
    walk_top_us INTEGER,           -- walk in progress: its newest created_at ...
    walk_top_ids TEXT,             -- ... the ids at that second ...
    resume_cursor TEXT,            -- ... the cursor of the next page to read ...
    walk_tail_ids TEXT,            -- ... and the ids of the last page's oldest second
    walked_from_us INTEGER,        -- when the last completed walk read its first page
    active_us INTEGER,             -- the listing's newest activity mark (updated_at,
                                   -- compute_last_active_at): `--skip-idle`
    listed_in TEXT,                -- scope of the listing that last showed it (org id, '*',
                                   -- 'shared'): a complete listing of that scope without it
                                   -- marks it deleted
    -- names (issue 21): when its branches and endpoints were last listed, and 1 when an
    -- operation named an id they did not show since then
    names_read_us INTEGER,
    names_due INTEGER DEFAULT 0
);
CREATE TABLE open_ops (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    status TEXT,
    fingerprint BLOB NOT NULL,
    version INTEGER NOT NULL,
    checked_us INTEGER NOT NULL,
    misses INTEGER NOT NULL DEFAULT 0, -- 404s in a row on its GET (one per run), dropped at
                                   -- MAX_MISSES only once older than walk.RETENTION_US
    changed_us INTEGER,            -- when it last changed (its updated_at), NULL: unknown
    retry_us INTEGER               -- its retry_at: a re-read is due once that passes
);
CREATE INDEX open_ops_project ON open_ops (project_id);
CREATE TABLE files (
    path TEXT PRIMARY KEY,         -- relative to the data dir
    staged TEXT,                   -- relative staged path while state = 'pending'
    partition TEXT NOT NULL,
    rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    state TEXT NOT NULL,           -- pending | live | deleting
    run_id TEXT,
    replaced_by TEXT               -- compaction: the merged file that takes over these rows
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    started_us INTEGER NOT NULL, finished_us INTEGER, outcome TEXT NOT NULL,
    projects_total INTEGER DEFAULT 0, projects_ok INTEGER DEFAULT 0,
    projects_failed INTEGER DEFAULT 0, requests INTEGER DEFAULT 0,
    responses_429 INTEGER DEFAULT 0, retries INTEGER DEFAULT 0,
    new_operations INTEGER DEFAULT 0, changed_operations INTEGER DEFAULT 0,
    versions_written INTEGER DEFAULT 0, error TEXT,
    projects_left INTEGER DEFAULT 0,   -- not reached or cut short (budget, stop): next run
    coverage_hour REAL, coverage_day REAL,  -- share of projects walked within the hour / day
    oldest_lag_us INTEGER,             -- since the stalest project's last completed walk
    open_unchecked_day INTEGER,        -- open operations not re-read for a day
    achieved_rps REAL, configured_rps REAL
);
"""
# Names (issue 21; what is tracked: `core.names`). Apart: migration 4 creates these as they are.
_NAMES_SCHEMA = """
CREATE TABLE named (               -- every branch / endpoint a listing showed (_names.LISTED)
    kind TEXT NOT NULL, id TEXT NOT NULL, project_id TEXT NOT NULL,
    created_us INTEGER, created_by TEXT, raw TEXT,
    first_seen_us INTEGER NOT NULL, last_seen_us INTEGER NOT NULL,
    deleted_us INTEGER,            -- the first listing of its project without it
    PRIMARY KEY (kind, id)
);
CREATE INDEX named_project ON named (project_id, kind);
CREATE TABLE name_versions (       -- every distinct state of the tracked fields (_names.Kind)
    kind TEXT NOT NULL, id TEXT NOT NULL, project_id TEXT NOT NULL, version INTEGER NOT NULL,
    tracked TEXT NOT NULL,         -- JSON (Kind.tracked_json)
    valid_from_us INTEGER NOT NULL, valid_to_us INTEGER,
    PRIMARY KEY (kind, id, version)
);
CREATE TABLE unlisted (            -- ids operations named that the next listing did not show:
    project_id TEXT NOT NULL, id TEXT NOT NULL,  -- known, so they never trigger a re-read
    PRIMARY KEY (project_id, id)
);
"""
_SCHEMA += _NAMES_SCHEMA

# The events outbox (issue 22). Its rows are written by `exporter.events.outbox` inside the committer's
# transaction (with the versions they announce) and deleted once every sink took them.
# One row per batch of events (one project's chunk of a commit), not per event: a row per
# event cost a backfill with --events-backfill ~10 us of SQLite work per event (bench/README.md).
_EVENTS_SCHEMA = """
CREATE TABLE event_batches (
    seq INTEGER PRIMARY KEY,       -- commit order: the order of delivery
    recorded_us INTEGER NOT NULL,  -- when its versions were committed (the backlog's age)
    events INTEGER NOT NULL,       -- how many events
    ids BLOB NOT NULL,             -- their ids ("<operation id>:<version>"), newline-separated
    lines BLOB NOT NULL,           -- their JSON, one line each (empty when `facts` is set)
    file_done INTEGER,             -- NULL: not for the file, else how many it has (in order)
    webhook_left INTEGER,          -- NULL: not for the webhook, else how many it has not taken
    webhook_acked BLOB,            -- one byte per event, 1 once the webhook answered 2xx
    facts BLOB                     -- NULL: `lines` holds the JSON, else what the JSON is built
                                   -- from with the committed rows (exporter.events.outbox)
)
"""

# Format 3-5 kept one row per event: carried over as batches of one.
_MIGRATE_EVENTS_TO_BATCHES = [
    "INSERT INTO event_batches (seq, recorded_us, events, ids, lines, file_done, webhook_left, "
    "webhook_acked) SELECT seq, recorded_us, 1, CAST(id AS BLOB), CAST(body AS BLOB) || X'0A', "
    "CASE WHEN to_file = 1 THEN 0 END, CASE WHEN to_webhook = 1 THEN 1 END, "
    "CASE WHEN to_webhook = 1 THEN X'00' END FROM events",
    "DROP TABLE events",
]


# Buckets of time since an open operation's last re-read (label, upper bound in hours).
REREAD_AGES = (("1h", 1), ("6h", 6), ("24h", 24), ("7d", 168))
REREAD_OLDER = "older"


def no_reread_ages() -> dict[str, int]:
    """Every bucket of `StateDB.open_by_last_read` at 0 (also where there is no state: the
    JSON of `check` and `status` has the same keys either way)."""
    return dict.fromkeys([label for label, _ in REREAD_AGES] + [REREAD_OLDER], 0)


_MIGRATE_TO_2 = [
    "ALTER TABLE open_ops ADD COLUMN misses INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE projects ADD COLUMN walk_tail_ids TEXT",
    "ALTER TABLE projects ADD COLUMN listed_in TEXT",
    "ALTER TABLE projects ADD COLUMN walked_from_us INTEGER",
    "ALTER TABLE projects ADD COLUMN active_us INTEGER",
    "ALTER TABLE files ADD COLUMN replaced_by TEXT",
    "ALTER TABLE runs ADD COLUMN projects_left INTEGER DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN coverage_hour REAL",
    "ALTER TABLE runs ADD COLUMN coverage_day REAL",
    "ALTER TABLE runs ADD COLUMN oldest_lag_us INTEGER",
    "ALTER TABLE runs ADD COLUMN open_unchecked_day INTEGER",
    "ALTER TABLE runs ADD COLUMN achieved_rps REAL",
    "ALTER TABLE runs ADD COLUMN configured_rps REAL",
]


def _added_column(statement: str) -> tuple[str, str] | None:
    """(table, column) of an `ALTER TABLE t ADD COLUMN c ...`; None for another statement."""
    words = statement.split()
    if words[:2] == ["ALTER", "TABLE"] and words[3:5] == ["ADD", "COLUMN"]:
        return words[2], words[5]
    return None


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _execute_once(con: sqlite3.Connection, statement: str) -> None:
    """A migration statement that may already have been applied (a state that a newer
    opsaudit wrote and an older one marked down): an existing column or table is left as is."""
    added = _added_column(statement)
    if added is not None and added[1] in _columns(con, added[0]):
        return
    statement = statement.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1)
    statement = statement.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
    con.execute(statement)


# NULL changed_us: due in the next run, which records it (exporter/engine/schedule.py).
_MIGRATE_TO_4 = [
    "ALTER TABLE open_ops ADD COLUMN changed_us INTEGER",
    "ALTER TABLE open_ops ADD COLUMN retry_us INTEGER",
]
_MIGRATE_TO_8 = [
    "ALTER TABLE projects ADD COLUMN names_read_us INTEGER",
    "ALTER TABLE projects ADD COLUMN names_due INTEGER DEFAULT 0",
    *(statement for statement in _NAMES_SCHEMA.split(";") if statement.strip()),
]


def _missing_columns(con: sqlite3.Connection) -> list[str]:
    """The statements of `_REPAIR` whose column this file lacks: none in a file migrated
    right. Format 2's migration grew after it shipped (budgets, --skip-idle) and ran below 2
    alone: an early format-2 file was marked migrated without those columns, and every later
    run failed ("no such column: active_us", exit 5)."""
    have: dict[str, set[str]] = {}
    missing = []
    for statement, (table, column) in _REPAIR:
        if table not in have:
            have[table] = _columns(con, table)
        if column not in have[table]:
            missing.append(statement)
    return missing


# Every column the migrations up to format 8 add, with its (table, column).
_REPAIR = [
    (statement, added)
    for statement in (*_MIGRATE_TO_2, *_MIGRATE_TO_4, *_MIGRATE_TO_8)
    if (added := _added_column(statement)) is not None
]


@dataclass
class ProjectCheckpoint:
    """Where the walk of one project stands (DESIGN.md, sync correctness)."""

    project_id: str
    checkpoint_us: int | None = None
    boundary_ids: frozenset[str] = frozenset()
    walk_top_us: int | None = None
    walk_top_ids: frozenset[str] = frozenset()
    resume_cursor: str | None = None
    walk_tail_ids: frozenset[str] = frozenset()
    open_ops: dict[str, OpenOp] = field(default_factory=dict)
    # A listing showed it or a walk of it completed: a 404 then means deleted. Never seen
    # (a mistyped --project): a 404 is an error (issue 19, finding 14).
    seen: bool = True
    names_read_us: int | None = None  # when its branches/endpoints were last listed
    names_due: bool = False  # an operation named an unknown id since that listing
    known_ids: frozenset[str] = frozenset()  # branch/endpoint ids listed (or known unlisted)


@dataclass(frozen=True)
class Coverage:
    """Account-wide currency of the trail (issue 12): who was walked how recently."""

    projects: int  # not deleted
    within_hour: int  # whose last completed walk is at most an hour old
    within_day: int
    oldest_lag_us: int | None  # since the stalest project's last walk (or first sighting)
    open_unchecked_day: int  # open operations not re-read for a day

    # None without projects: 0/0 was 1.0, "100% walked within the hour" of an empty account.
    @property
    def share_hour(self) -> float | None:
        return self.within_hour / self.projects if self.projects else None

    @property
    def share_day(self) -> float | None:
        return self.within_day / self.projects if self.projects else None


def _micros(text: Any) -> int | None:
    try:
        return to_micros(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    """A listing's text field as a text column holds it: a value of another type (a list, an
    object, a number: the API changed the field) as its JSON text, never a run's failure."""
    return value if value is None or isinstance(value, str) else orjson.dumps(value).decode()


def _activity(project: dict[str, Any]) -> int | None:
    """The newest of the listing fields that move when a project is active (`--skip-idle`)."""
    marks = [_micros(project.get(k)) for k in ("updated_at", "compute_last_active_at")]
    known = [m for m in marks if m is not None]
    return max(known) if known else None


def _ids(text: str | None) -> frozenset[str]:
    return frozenset(orjson.loads(text)) if text else frozenset()


def ids_json(ids: frozenset[str] | set[str]) -> str:
    return orjson.dumps(sorted(ids)).decode()


_WRITE_FAILURES = ("disk i/o error", "database or disk is full", "readonly database")


def _is_write_failure(exc: sqlite3.DatabaseError) -> bool:
    """Out of space, a file-size limit, a read-only file system: not a corrupt file."""
    return isinstance(exc, sqlite3.OperationalError) and any(
        text in str(exc).lower() for text in _WRITE_FAILURES
    )


def _write_failure_message(path: Path, exc: sqlite3.DatabaseError) -> str:
    return (
        f"writing the state file {path} failed ({exc}: the disk may be full or read-only); "
        "free some space or fix the mount, then run again (nothing committed was lost)"
    )


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A reader's connection: never writes; works on a read-only data directory too."""
    uri = path.resolve().as_uri()
    try:
        con = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.OperationalError:
        # WAL needs a writable -shm file beside the database; a read-only directory (a
        # restored backup, a read-only mount) has none: read it as an immutable file.
        return sqlite3.connect(
            f"{uri}?immutable=1", uri=True, check_same_thread=False, isolation_level=None
        )


def _create(path: Path) -> None:
    """A new, empty state file at `path`, written to a temporary name and renamed in."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("BEGIN")
            for statement in (_SCHEMA + _EVENTS_SCHEMA).split(";"):
                if statement.strip():
                    con.execute(statement)
            con.execute("INSERT INTO meta VALUES ('format', 'opsaudit-state')")
            con.execute("INSERT INTO meta VALUES ('format_version', ?)", (str(FORMAT_VERSION),))
            con.execute("COMMIT")
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        finally:
            con.close()
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


class StateDB:
    """Access to `state.sqlite`; one connection shared by the run's threads under a lock."""

    def __init__(self, path: Path, *, read_only: bool = False):
        """Open (with `read_only`: for readers, never creating or migrating anything)."""
        self.path = path
        # The format the file holds (a reader of an older one reads a copy migrated in memory:
        # its tables are this version's, its meta's format_version too).
        self.format_version = FORMAT_VERSION
        self._lock = threading.RLock()
        existed = path.exists() and path.stat().st_size > 0
        try:
            if read_only:
                self._con = _connect_read_only(path)
                self.format_version = self._check(migrate=False)
                if self.format_version < FORMAT_VERSION or _missing_columns(self._con):
                    self._read_migrated(self.format_version)
                return
            if not existed:
                # Built aside and renamed in: a creation cut short (disk full, kill) never
                # leaves a half-made state file that the next run would refuse.
                _create(path)
            self._con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=FULL")
            self._check()
            self.format_version = FORMAT_VERSION  # migrated, if it was older
        except OSError as exc:
            raise os_storage_error(path, exc, "cannot create the state file") from exc
        except sqlite3.DatabaseError as exc:
            if _is_write_failure(exc):
                raise StorageError(_write_failure_message(path, exc)) from exc
            if not os.access(path, os.R_OK if read_only else os.R_OK | os.W_OK):
                # SQLite says "unable to open database file": a file of another user, no more
                # corrupt than before (moving it away would start a new dataset).
                raise AccessDeniedError(path) from exc
            raise UnreadableStateError(
                f"state file {path} is corrupt or not an opsaudit state file ({exc}); "
                "it was left untouched: move it away to start a new dataset, or restore a backup"
            ) from exc

    def _check(self, migrate: bool = True) -> int:
        """Refuse a file that is not ours, newer or corrupt; migrate an older one (`migrate`).
        Returns the file's format version."""
        app_id = self._con.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise UnreadableStateError(
                f"{self.path} is an SQLite file of another application "
                f"(application_id {app_id:#x}); it was left untouched: point --data-dir at "
                "an opsaudit data directory"
            )
        rows = dict(self._con.execute("SELECT key, value FROM meta").fetchall())
        version = int(rows.get("format_version", "0"))
        if version > FORMAT_VERSION:
            raise StorageError(
                f"{self.path} was written by a newer opsaudit (state format {version}, this "
                f"version reads {FORMAT_VERSION}); upgrade opsaudit. The file was left untouched."
            )
        check = self._con.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(f"integrity check failed: {check}")
        if migrate and (version < FORMAT_VERSION or _missing_columns(self._con)):
            self._migrate(version)
        return version

    def _read_migrated(self, version: int) -> None:
        """A reader of a state an older opsaudit wrote reads a copy in memory migrated to this
        version's tables (`check` and `status` failed on a column it lacked, "unexpected error",
        until a sync migrated the file); the file itself is never written by a reader."""
        copy = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._con.backup(copy)
        self._con.close()
        self._con = copy
        self._migrate(version)

    def _migrate(self, version: int) -> None:
        """Bring an older state file up to FORMAT_VERSION, in one transaction."""
        with self.transaction() as con:
            if version < 2:
                for statement in _MIGRATE_TO_2:
                    con.execute(statement)
            if version < 4:
                # Only the columns it lacks: a file whose format number was set back by hand
                # (a restored or edited state) may have them already.
                for statement in _MIGRATE_TO_4:
                    _execute_once(con, statement)
            if version < 6:
                con.execute(_EVENTS_SCHEMA)
                old = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
                if con.execute(old).fetchone():
                    for statement in _MIGRATE_EVENTS_TO_BATCHES:
                        con.execute(statement)
            if version < 8:
                for statement in _MIGRATE_TO_8:
                    _execute_once(con, statement)
            if version < 9:
                _execute_once(con, "ALTER TABLE event_batches ADD COLUMN facts BLOB")
            if version < 12:
                _execute_once(con, "ALTER TABLE projects ADD COLUMN current_us INTEGER")
                con.execute("UPDATE projects SET current_us = last_synced_us")
            # A column a migration adds that the file still lacks (format 2's, above; also a
            # file already marked migrated without them, which `_check` sends here).
            for statement in _missing_columns(con):
                con.execute(statement)
            con.execute(
                "UPDATE meta SET value = ? WHERE key = 'format_version'", (str(FORMAT_VERSION),)
            )

    def total_changes(self) -> int:
        """Rows changed through this connection since it was opened (SQLite's total_changes):
        the lake store uploads the state only when this moved."""
        with self._lock:
            return int(self._con.total_changes)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._con.execute("BEGIN IMMEDIATE")
                try:
                    yield self._con
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._con.execute("ROLLBACK")
                    raise
                self._con.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if not _is_write_failure(exc):
                    raise
                with contextlib.suppress(sqlite3.Error):
                    self._con.execute("ROLLBACK")
                raise StorageError(_write_failure_message(self.path, exc)) from exc

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
        with self._lock:
            return self._con.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._con.close()

    # -- checkpoints and open operations --------------------------------------------------

    _CHECKPOINT_COLUMNS = (
        "checkpoint_us, boundary_ids, walk_top_us, walk_top_ids, resume_cursor, walk_tail_ids, "
        "(last_seen_us IS NOT NULL OR last_synced_us IS NOT NULL OR walk_top_us IS NOT NULL), "
        "names_read_us, names_due"
    )
    _KNOWN_IDS = "SELECT project_id, id FROM named UNION ALL SELECT project_id, id FROM unlisted"

    _OPEN_COLUMNS = (
        "id, project_id, created_us, status, fingerprint, version, checked_us, misses, "
        "changed_us, retry_us"
    )

    def load_checkpoint(self, project_id: str) -> ProjectCheckpoint:
        rows = self.query(
            f"SELECT {self._CHECKPOINT_COLUMNS} FROM projects WHERE id = ?", (project_id,)
        )
        known = self.query(
            f"SELECT id FROM ({self._KNOWN_IDS}) WHERE project_id = ?", (project_id,)
        )
        return self._checkpoint(
            project_id, rows[0] if rows else None, with_open=True, known=[r[0] for r in known]
        )

    def any_unwalked(self, project_ids: Iterable[str]) -> bool:
        """Whether one of these projects has no completed walk yet (its next is a backfill)."""
        synced = dict(self.query("SELECT id, last_synced_us FROM projects"))
        return any(synced.get(p) is None for p in project_ids)

    def checkpoints(self) -> Callable[[str], ProjectCheckpoint]:
        """A loader of checkpoints read in two queries for the whole account, not two per
        project (ten thousand projects: the state's lock is shared with the committer)."""
        rows = {
            r[0]: r[1:] for r in self.query(f"SELECT id, {self._CHECKPOINT_COLUMNS} FROM projects")
        }
        with_open = {r[0] for r in self.query("SELECT DISTINCT project_id FROM open_ops")}
        known: dict[str, list[str]] = {}
        for pid, name_id in self.query(self._KNOWN_IDS):
            known.setdefault(pid, []).append(name_id)

        def load(project_id: str) -> ProjectCheckpoint:
            return self._checkpoint(
                project_id,
                rows.pop(project_id, None),
                with_open=project_id in with_open,
                known=known.pop(project_id, ()),
            )

        return load

    def _checkpoint(
        self,
        project_id: str,
        row: tuple[Any, ...] | None,
        *,
        with_open: bool,
        known: Iterable[str] = (),
    ) -> ProjectCheckpoint:
        cp = ProjectCheckpoint(project_id, known_ids=frozenset(known))
        if row is not None:
            cp.checkpoint_us, boundary, cp.walk_top_us, top_ids, cp.resume_cursor, tail = row[:6]
            cp.seen = bool(row[6])
            cp.names_read_us, cp.names_due = row[7], bool(row[8])
            cp.boundary_ids = _ids(boundary)
            cp.walk_top_ids = _ids(top_ids)
            cp.walk_tail_ids = _ids(tail)
        if with_open:
            for op in self.query(
                f"SELECT {self._OPEN_COLUMNS} FROM open_ops WHERE project_id = ?",
                (project_id,),
            ):
                cp.open_ops[op[0]] = OpenOp(*op)
        return cp

    def apply_names(self, con: sqlite3.Connection, c: Chunk) -> None:
        """Inside the committer's transaction, before the chunk's rows are recorded anywhere
        else (the events name what these listings show): the chunk's listings, if any."""
        if c.names is not None:
            self._record_listings(con, c.project_id, c.names)
        if c.unlisted:
            con.executemany(
                "INSERT OR IGNORE INTO unlisted (project_id, id) VALUES (?, ?)",
                [(c.project_id, i) for i in sorted(c.unlisted)],
            )

    def apply_chunk(self, con: sqlite3.Connection, c: Chunk) -> None:
        """Inside the committer's transaction: the state changes of one walk chunk, after its
        listings (`apply_names`)."""
        if c.open_deletes:
            con.executemany("DELETE FROM open_ops WHERE id = ?", [(i,) for i in c.open_deletes])
        if c.open_upserts:
            con.executemany(
                f"INSERT OR REPLACE INTO open_ops ({self._OPEN_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        o.id,
                        o.project_id,
                        o.created_us,
                        o.status,
                        o.fingerprint,
                        o.version,
                        o.checked_us,
                        o.misses,
                        o.changed_us,
                        o.retry_us,
                    )
                    for o in c.open_upserts.values()
                ],
            )
        if c.progress is not None:
            top, top_ids, cursor, tail_ids = c.progress
            con.execute(
                "UPDATE projects SET walk_top_us = ?, walk_top_ids = ?, resume_cursor = ?, "
                "walk_tail_ids = ? WHERE id = ?",
                (top, ids_json(top_ids), cursor, ids_json(tail_ids), c.project_id),
            )
        if c.completed is not None:
            checkpoint, boundary = c.completed
            con.execute(
                "UPDATE projects SET checkpoint_us = ?, boundary_ids = ?, walk_top_us = NULL, "
                "walk_top_ids = NULL, resume_cursor = NULL, walk_tail_ids = NULL, "
                "last_synced_us = ?, current_us = ?, walked_from_us = coalesce(?, walked_from_us), "
                "last_error = NULL WHERE id = ?",
                (
                    checkpoint,
                    ids_json(boundary),
                    c.completed_us,
                    c.completed_us,
                    c.walked_from_us,
                    c.project_id,
                ),
            )
            self._set_deleted(con, [c.project_id], None)  # its operations answered: not deleted
        if c.error is not None:
            # After `completed` in the same chunk order: a failure is never wiped by a
            # checkpoint that the committer applies later (issue 9, finding 8).
            con.execute("UPDATE projects SET last_error = ? WHERE id = ?", (c.error, c.project_id))
        if c.deleted_us is not None:
            self._set_deleted(con, [c.project_id], c.deleted_us)
        if c.names_due:
            # With the rows that named an unknown id: a run cut short before the listings
            # were read leaves them due for the next one.
            con.execute("UPDATE projects SET names_due = 1 WHERE id = ?", (c.project_id,))

    def _set_deleted(self, con: sqlite3.Connection, ids: list[str], when: int | None) -> None:
        """Mark projects deleted at `when` (kept if already), or not deleted (None). Their
        branches and computes show the project's deletion (`names_rows`): the names tables are
        written again when it changes."""
        if when is None:
            sql, params = "deleted_us = NULL WHERE id = ? AND deleted_us IS NOT NULL", []
        else:
            sql, params = "deleted_us = ? WHERE id = ? AND deleted_us IS NULL", [when]
        cursor = con.executemany(f"UPDATE projects SET {sql}", [(*params, i) for i in ids])
        if cursor.rowcount > 0:
            self._bump_names(con)

    # -- names (issue 21; what is tracked: `core.names`) ----------------------------------------

    _NAMES_GENERATION = "names_generation"  # meta: bumped by every change to the names

    def _version(
        self,
        con: sqlite3.Connection,
        kind: Kind,
        objects: list[tuple[str, str, dict[str, Any]]],
        now: int,
    ) -> int:
        """New versions for the objects (id, project id, object) whose tracked fields differ
        from their latest version; returns how many were written."""
        latest: dict[str, tuple[int, str, int]] = {}
        ids = [i for i, _, _ in objects]
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for name_id, version, tracked, valid_from in con.execute(
                "SELECT id, version, tracked, valid_from_us FROM name_versions WHERE kind = ? "
                f"AND valid_to_us IS NULL AND id IN ({','.join('?' * len(part))})",
                (kind.key, *part),
            ):
                latest[name_id] = (version, tracked, valid_from)
        inserts, closes = [], []
        for name_id, project_id, obj in objects:
            tracked = kind.tracked_json(obj)
            before = latest.get(name_id)
            if before is not None and (before[1] == tracked or kind.same_state(before[1], obj)):
                continue  # (the same values spelled differently keep the version's text)
            version, start = 1, now
            if before is not None:
                # A clock stepped back (NTP, another host) would start this version before the
                # last one: spans overlapped and `operations` showed an operation twice.
                version, start = before[0] + 1, max(now, before[2] + 1)
                closes.append((start, kind.key, name_id, before[0]))
            inserts.append((kind.key, name_id, project_id, version, tracked, start))
            latest[name_id] = (version, tracked, start)
        con.executemany(
            "UPDATE name_versions SET valid_to_us = ? WHERE kind = ? AND id = ? AND version = ?",
            closes,
        )
        con.executemany(
            "INSERT INTO name_versions (kind, id, project_id, version, tracked, valid_from_us) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            inserts,
        )
        return len(inserts)

    def _record_listings(self, con: sqlite3.Connection, project_id: str, got: Listings) -> None:
        """One project's complete branches and endpoints listings, read at `got.observed_us`:
        new versions, first/last seen, deleted_at for ids the listing no longer has."""
        now = got.observed_us
        listed: set[str] = set()
        for kind in LISTED:
            objects = [
                (o["id"], project_id, o)
                for o in got.objects.get(kind.key, [])
                if isinstance(o, dict) and isinstance(o.get("id"), str)
            ]
            self._version(con, kind, objects, now)
            ids = [i for i, _, _ in objects]
            listed.update(ids)
            con.executemany(
                "INSERT INTO named (kind, id, project_id, created_us, created_by, raw, "
                "first_seen_us, last_seen_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                # When and by whom it was created do not change: a listing that lost them (an
                # odd value, a field gone) keeps what an earlier one said.
                "ON CONFLICT (kind, id) DO UPDATE SET project_id = excluded.project_id, "
                "created_us = coalesce(excluded.created_us, named.created_us), "
                "created_by = coalesce(excluded.created_by, named.created_by), "
                "raw = excluded.raw, last_seen_us = excluded.last_seen_us, deleted_us = NULL",
                [
                    (
                        kind.key,
                        i,
                        project_id,
                        _micros(o.get("created_at")),
                        created_by(o),
                        orjson.dumps(o).decode(),
                        now,
                        now,
                    )
                    for i, _, o in objects
                ],
            )
            con.execute("CREATE TEMP TABLE IF NOT EXISTS _listed (id TEXT PRIMARY KEY)")
            con.execute("DELETE FROM _listed")
            con.executemany("INSERT OR IGNORE INTO _listed VALUES (?)", [(i,) for i in ids])
            con.execute(
                "UPDATE named SET deleted_us = ? WHERE kind = ? AND project_id = ? AND "
                "deleted_us IS NULL AND id NOT IN (SELECT id FROM _listed)",
                (now, kind.key, project_id),
            )
            con.execute("DELETE FROM _listed")
        con.executemany(
            "INSERT OR IGNORE INTO unlisted (project_id, id) VALUES (?, ?)",
            [(project_id, i) for i in sorted(got.unknown - listed)],
        )
        con.execute(
            "UPDATE projects SET names_read_us = ?, names_due = 0 WHERE id = ?", (now, project_id)
        )
        self._bump_names(con)

    def _bump_names(self, con: sqlite3.Connection) -> None:
        con.execute(
            "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET "
            "value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
            (self._NAMES_GENERATION,),
        )

    def name_spans(
        self, con: sqlite3.Connection, kind: str, ids: Iterable[Any]
    ) -> dict[str, list[tuple[int, int | None, str | None]]]:
        """Per branch / endpoint id (`kind`) ever listed: (from, to, name) of each version, in
        order; the first from the beginning of time (the views' join: an operation older than
        the first listing takes the earliest name). Inside a transaction (`con`)."""
        wanted = sorted({i for i in ids if isinstance(i, str)})
        spans: dict[str, list[tuple[int, int | None, str | None]]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            for name_id, version, since, until, tracked in con.execute(
                "SELECT id, version, valid_from_us, valid_to_us, tracked FROM name_versions "
                f"WHERE kind = ? AND id IN ({','.join('?' * len(part))}) ORDER BY id, version",
                (kind, *part),
            ):
                name = orjson.loads(tracked).get("name")
                spans.setdefault(name_id, []).append(
                    (
                        since if version > 1 else -(2**63),
                        until,
                        name if isinstance(name, str) else None,
                    )
                )
        return spans

    def names_in_effect(
        self, con: sqlite3.Connection, kind: str, wanted: Sequence[tuple[Any, int]]
    ) -> list[str | None]:
        """For each (id, created_us): the name of that branch / endpoint (`kind`) in effect when
        the operation was created, as the views join it (the version whose span holds it; the
        earliest for an operation older than the first listing; None for an id never listed).
        Inside a transaction (`con`): the events of a commit carry the names known then."""
        spans = self.name_spans(con, kind, (i for i, _ in wanted))
        out: list[str | None] = []
        for name_id, created in wanted:
            found = None
            for since, until, name in spans.get(name_id, ()) if isinstance(name_id, str) else ():
                if since <= created and (until is None or created < until):
                    found = name
                    break
            out.append(found)
        return out

    def keeps_names(self) -> bool:
        """Whether this state has the names tables (a state read-only from before them has not:
        readers never migrate it)."""
        return bool(
            self.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'named'")
        )

    def names_generation(self) -> str:
        """Changes with every change to the names: the exports rewrite the tables on it."""
        return self.get_meta(self._NAMES_GENERATION) or "0"

    def names_rows(self, table: Table) -> list[dict[str, Any]]:
        """The rows of one names table (`core.names.TABLES`): tracked fields as listed, times in
        microseconds."""
        out: list[dict[str, Any]] = []
        if table.versions:
            for name_id, project_id, version, tracked, start, end in self.query(
                "SELECT id, project_id, version, tracked, valid_from_us, valid_to_us "
                "FROM name_versions WHERE kind = ? ORDER BY id, version",
                (table.kind.key,),
            ):
                row = orjson.loads(tracked)
                row.update(
                    id=name_id,
                    project_id=project_id,
                    version=version,
                    valid_from=start,
                    valid_to=end,
                )
                out.append(row)
            return out
        for row_values in self.query(
            # A deleted project's branches and computes went with it, unlisted or not.
            "SELECT n.id, n.project_id, v.tracked, n.created_us, n.created_by, n.first_seen_us, "
            "n.last_seen_us, coalesce(n.deleted_us, p.deleted_us) FROM named n "
            "JOIN name_versions v ON v.kind = n.kind AND v.id = n.id AND v.valid_to_us IS NULL "
            "LEFT JOIN projects p ON p.id = n.project_id WHERE n.kind = ? ORDER BY n.id",
            (table.kind.key,),
        ):
            name_id, project_id, tracked, created, who, first, last, deleted = row_values
            row = orjson.loads(tracked)
            row.update(
                id=name_id,
                project_id=project_id,
                created_at=created,
                created_by=who,
                first_seen_at=first,
                last_seen_at=last,
                deleted_at=deleted,
            )
            out.append(row)
        return out

    def stalest_first(self, ids: Iterable[str]) -> list[str]:
        """`ids` in the order a run should visit them: never completed first, then the least
        recently completed walk (a budgeted run covers the stalest; the next ones the rest)."""
        order = {
            pid: (synced is not None, synced or 0, pid)
            for pid, synced in self.query("SELECT id, last_synced_us FROM projects")
        }
        return sorted(ids, key=lambda pid: order.get(pid, (False, 0, pid)))

    def idle_projects(self, now: int, full_sweep_us: int) -> set[str]:
        """Projects `--skip-idle` may leave for a later run: walked completely, with nothing
        tracked, no error, no walk in progress, no names to read, no activity in the listing
        since their last walk began, and walked within `full_sweep_us` (the guarantee: every
        project is walked at least that often).

        Only a mark this run's listing wrote (`last_seen_us = now`, the run's start) is trusted: `--project`
        and a partial listing's unavailable projects carry an earlier listing's mark, which says
        nothing of what happened since (issue 19, finding 1). The marks are whole seconds and the
        walk's start is this host's clock: the mark's whole second must end `IDLE_SKEW_US`
        before the walk began, or activity in the walk's own second (or hidden by clock skew)
        would read as idle (finding 2)."""
        return {
            row[0]
            for row in self.query(
                "SELECT id FROM projects p WHERE checkpoint_us IS NOT NULL "
                "AND resume_cursor IS NULL AND last_error IS NULL AND deleted_us IS NULL "
                "AND last_seen_us = ? "
                "AND active_us IS NOT NULL AND walked_from_us IS NOT NULL "
                "AND (active_us / 1000000 + 1) * 1000000 + ? <= walked_from_us "
                "AND last_synced_us >= ? "
                # Names still to read (a run cut short before its listings, an id they lacked):
                # those of a new branch's operations stayed NULL until a full sweep.
                "AND names_read_us IS NOT NULL AND names_due = 0 "
                "AND NOT EXISTS (SELECT 1 FROM open_ops o WHERE o.project_id = p.id)",
                (now, IDLE_SKEW_US, now - full_sweep_us),
            )
        }

    def found_idle(self, ids: Collection[str], now: int) -> None:
        """This run's listing (`now`, its start) showed `ids` idle: their trails are complete as
        of it though no walk read them (`current_us`; their last walk stays `last_synced_us`,
        which the full sweep counts from)."""
        with self.transaction() as con:
            con.executemany(
                "UPDATE projects SET current_us = max(coalesce(current_us, 0), ?) WHERE id = ?",
                [(now, pid) for pid in sorted(ids)],
            )

    def refresh_allowance(self, limit: int, due: Callable[[OpenOp], bool]) -> set[str]:
        """The `limit` tracked operations checked longest ago among those `due`, across the
        whole account: the single-operation GETs a run may spend go to them (fair: no
        project's starve)."""
        allowed: set[str] = set()
        if limit <= 0:
            return allowed
        with self._lock:
            rows = self._con.execute(
                f"SELECT {self._OPEN_COLUMNS} FROM open_ops WHERE {_LISTED_PROJECT} "
                "ORDER BY checked_us, id"
            )
            for row in rows:
                if due(OpenOp(*row)):
                    allowed.add(row[0])
                    if len(allowed) >= limit:
                        break
        return allowed

    def open_by_last_read(self, now: int) -> dict[str, int]:
        """Open operations (not the settling finished ones) by time since their last re-read:
        `status`, `check` and the metrics file show it (README, choosing the bound)."""
        edges = [(label, now - hours * 3_600_000_000) for label, hours in REREAD_AGES]
        counts = no_reread_ages()
        for (checked,) in self.query(
            f"SELECT checked_us FROM open_ops WHERE {_still_open()} AND {_LISTED_PROJECT}"
        ):
            for label, since in edges:
                if checked >= since:
                    counts[label] += 1
                    break
            else:
                counts[REREAD_OLDER] += 1
        return counts

    def set_refresh_every(self, every_us: int) -> None:
        """The run's --refresh-open-every: `check` judges "not re-read" against it."""
        self.set_meta("refresh_open_every_us", str(int(every_us)))

    def refresh_every(self) -> int | None:
        value = self.get_meta("refresh_open_every_us")
        return int(value) if value is not None else None

    def coverage(self, now: int) -> Coverage:
        """How current the trail is, account-wide (status, check, sync_runs)."""
        hour, day = now - 3_600_000_000, now - 86_400_000_000
        total, in_hour, in_day, oldest = self.query(
            "SELECT count(*), count(*) FILTER (WHERE current_us >= ?), "
            "count(*) FILTER (WHERE current_us >= ?), "
            "min(coalesce(current_us, first_seen_us)) FROM projects WHERE deleted_us IS NULL",
            (hour, day),
        )[0]
        [(unchecked,)] = self.query(
            f"SELECT count(*) FROM open_ops WHERE checked_us < ? AND {_still_open()} "
            f"AND {_LISTED_PROJECT}",
            (day,),
        )
        return Coverage(
            projects=total,
            within_hour=in_hour,
            within_day=in_day,
            oldest_lag_us=None if oldest is None else max(0, now - oldest),
            open_unchecked_day=unchecked,
        )

    def open_count(self) -> int:
        """Operations still being re-read (not the finished ones kept for one more look)."""
        return int(
            self.query(
                f"SELECT count(*) FROM open_ops WHERE {_still_open()} AND {_LISTED_PROJECT}"
            )[0][0]
        )

    # -- projects -------------------------------------------------------------------------

    def upsert_projects(self, projects: list[dict[str, Any]], scope: str, now: int) -> None:
        """Record one page of the listing: the snapshot of each project, seen now, and a new
        `project_versions` row for each whose listed settings changed."""
        with self.transaction() as con:
            changed = self._version(con, PROJECT, [(p["id"], p["id"], p) for p in projects], now)
            if changed:
                self._bump_names(con)
            con.executemany(
                "INSERT INTO projects (id, first_seen_us) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(p["id"], now) for p in projects],
            )
            self._set_deleted(con, [p["id"] for p in projects], None)
            con.executemany(
                "UPDATE projects SET name = ?, region_id = ?, pg_version = ?, "
                "platform_id = ?, provisioner = ?, org_id = ?, owner_id = ?, "
                "created_us = ?, updated_us = ?, raw = ?, last_seen_us = ?, "
                "listed_in = ?, active_us = ? WHERE id = ?",
                [
                    (
                        _text(p.get("name")),
                        _text(p.get("region_id")),
                        p.get("pg_version") if isinstance(p.get("pg_version"), int) else None,
                        _text(p.get("platform_id")),
                        _text(p.get("provisioner")),
                        _text(p.get("org_id")),
                        _text(p.get("owner_id")),
                        _micros(p.get("created_at")),
                        _micros(p.get("updated_at")),
                        orjson.dumps(p).decode(),
                        now,
                        scope,
                        _activity(p),
                        p["id"],
                    )
                    for p in projects
                ],
            )

    def add_known(self, ids: Iterable[str], now: int) -> None:
        """Projects known by id only (--project, a partial listing's unavailable ones)."""
        with self.transaction() as con:
            con.executemany(
                "INSERT INTO projects (id, first_seen_us) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(i, now) for i in ids],
            )

    def mark_vanished(self, present: Iterable[str], complete_scopes: list[str], now: int) -> None:
        """Mark deleted the projects that a complete listing of their scope left out."""
        if not complete_scopes:
            return
        with self.transaction() as con:
            con.execute("CREATE TEMP TABLE IF NOT EXISTS _present (id TEXT PRIMARY KEY)")
            con.execute("DELETE FROM _present")
            con.executemany("INSERT OR IGNORE INTO _present VALUES (?)", [(i,) for i in present])
            scopes = ",".join("?" * len(complete_scopes))
            # A state from before `listed_in` knew only org ids: fall back to org_id for them.
            vanished = con.execute(
                "UPDATE projects SET deleted_us = ? WHERE deleted_us IS NULL "
                "AND last_seen_us IS NOT NULL AND id NOT IN (SELECT id FROM _present) AND ("
                f"listed_in IN ({scopes}) OR (listed_in IS NULL AND ("
                f"org_id IN ({scopes}) OR '*' IN ({scopes}))))",
                (now, *complete_scopes, *complete_scopes, *complete_scopes),
            )
            if vanished.rowcount > 0:
                self._bump_names(con)  # their branches and computes show the deletion
            # Its tracked operations stay: a listing that shows it again (an API's moment, not
            # a deletion) has them re-read; `_LISTED_PROJECT` leaves them out meanwhile.
            con.execute("DELETE FROM _present")

    def forget_never_read(self, present: Iterable[str]) -> list[str]:
        """Forget the projects not in `present` (a listing of everything the key sees) that no
        listing ever showed and nothing was ever read from: a mistyped `--project` (check would
        flag it for ever). Returns their ids."""
        listed = set(present)
        with self.transaction() as con:
            rows = con.execute(
                "SELECT id FROM projects WHERE last_seen_us IS NULL AND last_synced_us IS NULL "
                "AND checkpoint_us IS NULL AND walk_top_us IS NULL AND deleted_us IS NULL "
                "AND id NOT IN (SELECT project_id FROM open_ops)"
            ).fetchall()
            gone = sorted(pid for (pid,) in rows if pid not in listed)
            con.executemany("DELETE FROM projects WHERE id = ?", [(pid,) for pid in gone])
        return gone

    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as con:
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- runs -----------------------------------------------------------------------------

    def start_run(self, run_id: str, started_us: int) -> None:
        with self.transaction() as con:
            con.execute(
                f"INSERT INTO runs (run_id, started_us, outcome) VALUES (?, ?, '{Outcome.RUNNING}')",
                (run_id, started_us),
            )

    def add_run(self, run_id: str, started_us: int) -> None:
        """A run known from elsewhere (a killed writer's lease), `running` unless recorded."""
        with self.transaction() as con:
            con.execute(
                "INSERT OR IGNORE INTO runs (run_id, started_us, outcome) "
                f"VALUES (?, ?, '{Outcome.RUNNING}')",
                (run_id, started_us),
            )

    def record_ended(
        self, run_id: str, started_us: int, finished_us: int, outcome: str, error: str | None
    ) -> None:
        """A run known from elsewhere to have ended so (its end never reached the store:
        `store.lake.lease.Ended`): over what the state says of it, which may be how it went
        before the upload that failed (`ok`, uploaded just before its `sync_runs` export)."""
        with self.transaction() as con:
            con.execute(
                "INSERT OR IGNORE INTO runs (run_id, started_us, outcome) VALUES (?, ?, ?)",
                (run_id, started_us, outcome),
            )
            con.execute(
                "UPDATE runs SET finished_us = ?, outcome = ?, error = ? WHERE run_id = ?",
                (finished_us, outcome, error, run_id),
            )

    def finish_run(self, run_id: str, finished_us: int, **counts: Any) -> None:
        """Record a run's outcome and counters (the `runs` columns named in `counts`)."""
        names = sorted(counts)
        with self.transaction() as con:
            con.execute(
                f"UPDATE runs SET finished_us = ?, {', '.join(f'{n} = ?' for n in names)} "
                "WHERE run_id = ?",
                (finished_us, *(counts[n] for n in names), run_id),
            )

    def mark_killed_runs(self, *, counted: bool = False, live: str | None = None) -> None:
        """Runs that a kill interrupted stay visible as such, with the versions their commits
        wrote (they said 0 while `operation_versions` held theirs): summed from the files table,
        or, `counted`, as each commit added them (`count_written`: a Delta table's commits are
        not files of this state). Every `running` run but `live` (the lease's, for a reader)."""
        written = (
            "versions_written"
            if counted
            else "(SELECT coalesce(sum(rows), 0) FROM files WHERE files.run_id = runs.run_id "
            "AND files.state <> 'pending' AND files.path LIKE 'operation_versions/%')"
        )
        with self.transaction() as con:
            con.execute(
                f"UPDATE runs SET outcome = '{Outcome.KILLED}', versions_written = {written} "
                f"WHERE outcome = '{Outcome.RUNNING}' AND run_id IS NOT ?",
                (live,),
            )

    @staticmethod
    def count_progress(
        con: sqlite3.Connection, run_id: str, new: int, changed: int, stats: Any
    ) -> None:
        """Add a commit's new and changed operations to its run's row, and set its requests so
        far (`RequestStats`), in the commit's own state transaction."""
        con.execute(
            "UPDATE runs SET new_operations = new_operations + ?, "
            "changed_operations = changed_operations + ?, requests = ?, responses_429 = ?, "
            "retries = ? WHERE run_id = ?",
            (new, changed, stats.requests, stats.responses_429, stats.retries, run_id),
        )

    @staticmethod
    def count_written(con: sqlite3.Connection, run_id: str, rows: int) -> None:
        """Add a commit's versions to its run's row, in the commit's own state transaction."""
        con.execute(
            "UPDATE runs SET versions_written = versions_written + ? WHERE run_id = ?",
            (rows, run_id),
        )

    def projects_rows(self) -> list[ProjectRow]:
        """The `projects` table's rows, by id."""
        rows = self.query(
            "SELECT id, name, region_id, pg_version, platform_id, provisioner, org_id, "
            "owner_id, created_us, updated_us, raw, first_seen_us, last_seen_us, deleted_us, "
            "last_synced_us, current_us, checkpoint_us, last_error, "
            "(SELECT count(*) FROM open_ops o WHERE o.project_id = p.id AND "
            f"p.deleted_us IS NULL AND {_still_open('o.status')}) FROM projects p ORDER BY id"
        )
        return [ProjectRow(*r) for r in rows]

    def has_running_run(self) -> bool:
        """Whether a run is recorded `running`: one in progress, or killed (not yet recorded so
        by the next sync's recovery)."""
        return bool(
            self.query("SELECT 1 FROM runs WHERE outcome = ? LIMIT 1", (Outcome.RUNNING.value,))
        )

    def runs_rows(self) -> list[RunRow]:
        """The `sync_runs` table's rows, oldest first."""
        rows = self.query(
            "SELECT run_id, started_us, finished_us, outcome, projects_total, projects_ok, "
            "projects_failed, requests, responses_429, retries, new_operations, "
            "changed_operations, versions_written, error, projects_left, coverage_hour, "
            "coverage_day, oldest_lag_us / 1e6, open_unchecked_day, achieved_rps, "
            "configured_rps FROM runs ORDER BY started_us"
        )
        return [RunRow(*r) for r in rows]

    # -- files (the commit protocol of `store.local.dataset`) -----------------------------------------

    def live_files(self) -> list[str]:
        """The committed data files readers may read (relative paths), in path order."""
        return [r[0] for r in self.query("SELECT path FROM files WHERE state = 'live' ORDER BY 1")]

    def known_files(self) -> set[str]:
        """Every data file the state knows of (committed, being published or retired)."""
        return {r[0] for r in self.query("SELECT path FROM files")}

    def files_in(self, state: str) -> list[tuple[str, str | None]]:
        return self.query("SELECT path, staged FROM files WHERE state = ? ORDER BY 1", (state,))

    def live_files_by_partition(self) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {}
        for partition, path, rows in self.query(
            "SELECT partition, path, rows FROM files WHERE state = 'live' ORDER BY partition, path"
        ):
            out.setdefault(partition, []).append((path, rows))
        return out

    def register_pending(
        self,
        con: sqlite3.Connection,
        files: Iterable[Any],
        run_id: str,
        replacing: Iterable[str] = (),
    ) -> None:
        """Inside the caller's transaction: files committed but not yet published, and (for a
        compaction's single output) the live files it replaces once it is published."""
        files = list(files)
        con.executemany(
            "INSERT INTO files (path, staged, partition, rows, bytes, state, run_id) "
            "VALUES (?, ?, ?, ?, ?, 'pending', ?)",
            [(f.path, f.staged, f.partition, f.rows, f.bytes, run_id) for f in files],
        )
        replacing = list(replacing)
        if replacing:
            [output] = files
            con.executemany(
                "UPDATE files SET replaced_by = ? WHERE path = ?",
                [(output.path, p) for p in replacing],
            )

    def mark_live(self, paths: Iterable[str]) -> None:
        """Published: readers see these files, and stop seeing the files they replace."""
        paths = list(paths)
        with self.transaction() as con:
            con.executemany(
                "UPDATE files SET state = 'live', staged = NULL WHERE path = ?",
                [(p,) for p in paths],
            )
            con.executemany(
                "UPDATE files SET state = 'deleting' WHERE replaced_by = ?", [(p,) for p in paths]
            )

    def forget_files(self, paths: Iterable[str]) -> None:
        with self.transaction() as con:
            con.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])


# How long a run waits for the helpers of a run that died (the views database's child, the
# events appender: they inherit the lock and finish their work alone) before it says the
# directory is locked.
HELPERS_WAIT_S = 60.0


def _holder_gone(fd: int) -> bool:
    """Whether the run that took the lock (its pid, written in the lock file) is gone while the
    lock is still held: then one of its helpers holds it, for a moment."""
    try:
        pid = int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return False  # killed before it wrote its pid, or not ours: held, as far as we know
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def settled_runs(runs: list[RunRow], lock_path: Path) -> list[RunRow]:
    """`runs` as a reader should show them: a run still `running` whose process is gone (the
    pid the lock file names: it took the lock last) was killed; the next sync's recovery
    records it so (`mark_killed_runs`). Nothing is locked or written."""
    if not any(r.outcome == Outcome.RUNNING for r in runs):
        return runs
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return runs
    try:
        gone = _holder_gone(fd)
    finally:
        os.close(fd)
    if not gone:
        return runs
    return [r._replace(outcome=Outcome.KILLED) if r.outcome == Outcome.RUNNING else r for r in runs]


def _await_lock(fd: int, seconds: float | None, stop: threading.Event | None = None) -> bool:
    """Whether the lock was taken within `seconds` (None: however long), polled so that `stop`
    ends the wait at once (a blocking flock is restarted after a signal's handler)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while deadline is None or time.monotonic() < deadline:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if stop is None:
                time.sleep(0.01)
            elif stop.wait(0.05):
                return False
    return False


class DataDirLock:
    """An exclusive lock on the data directory (flock: released by the OS if we are killed)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, wait: bool, stop: threading.Event | None = None) -> None:
        """Take the lock, or raise `LockHeldError`; with `wait`, wait for it (`StoppedError`
        once `stop` is set: a sync's Ctrl-C or SIGTERM)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Blocking only when no stop is to be heeded (compact: its Ctrl-C interrupts it).
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait and stop is None else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            if wait:
                taken = _await_lock(fd, None, stop)
            else:
                taken = _holder_gone(fd) and _await_lock(fd, HELPERS_WAIT_S, stop)
            if not taken:
                os.close(fd)
                if stop is not None and stop.is_set():
                    raise StoppedError.waiting(f"the lock {self.path}") from None
                raise LockHeldError(
                    f"another opsaudit sync is running on this data directory (lock "
                    f"{self.path}); it exits by itself, or use --wait to queue behind it"
                ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    @property
    def fd(self) -> int | None:
        """The locked descriptor while held (a process that inherits it holds the lock too)."""
        return self._fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


__all__ = [
    "TERMINAL_STATUSES",
    "Coverage",
    "DataDirLock",
    "OpenOp",
    "ProjectCheckpoint",
    "StateDB",
    "ids_json",
    "settled_runs",
]
