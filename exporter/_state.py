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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from exporter._errors import LockHeldError, StorageError

APPLICATION_ID = 0x4F505341  # "OPSA": marks the file as ours (PRAGMA application_id)
FORMAT_VERSION = 1

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
    last_error TEXT,
    checkpoint_us INTEGER,         -- newest created_at of the last completed walk
    boundary_ids TEXT,             -- JSON list: ids at exactly checkpoint_us
    walk_top_us INTEGER,           -- walk in progress: its newest created_at ...
    walk_top_ids TEXT,             -- ... the ids at that instant ...
    resume_cursor TEXT             -- ... and the cursor of the next page to read
);
CREATE TABLE open_ops (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    status TEXT,
    fingerprint BLOB NOT NULL,
    version INTEGER NOT NULL,
    checked_us INTEGER NOT NULL
);
CREATE INDEX open_ops_project ON open_ops (project_id);
CREATE TABLE files (
    path TEXT PRIMARY KEY,         -- relative to the data dir
    staged TEXT,                   -- relative staged path while state = 'pending'
    partition TEXT NOT NULL,
    rows INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    state TEXT NOT NULL,           -- pending | live | deleting
    run_id TEXT
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    started_us INTEGER NOT NULL, finished_us INTEGER, outcome TEXT NOT NULL,
    projects_total INTEGER DEFAULT 0, projects_ok INTEGER DEFAULT 0,
    projects_failed INTEGER DEFAULT 0, requests INTEGER DEFAULT 0,
    responses_429 INTEGER DEFAULT 0, retries INTEGER DEFAULT 0,
    new_operations INTEGER DEFAULT 0, changed_operations INTEGER DEFAULT 0,
    versions_written INTEGER DEFAULT 0, error TEXT
);
"""


@dataclass
class OpenOp:
    """An operation last seen in a non-terminal status: re-read until terminal."""

    id: str
    project_id: str
    created_us: int
    status: str | None
    fingerprint: bytes
    version: int
    checked_us: int


@dataclass
class ProjectCheckpoint:
    """Where the walk of one project stands (DESIGN.md, sync correctness)."""

    project_id: str
    checkpoint_us: int | None = None
    boundary_ids: frozenset[str] = frozenset()
    walk_top_us: int | None = None
    walk_top_ids: frozenset[str] = frozenset()
    resume_cursor: str | None = None
    open_ops: dict[str, OpenOp] = field(default_factory=dict)


def _ids(text: str | None) -> frozenset[str]:
    return frozenset(orjson.loads(text)) if text else frozenset()


def ids_json(ids: frozenset[str] | set[str]) -> str:
    return orjson.dumps(sorted(ids)).decode()


class StateDB:
    """Access to `state.sqlite`; one connection shared by the run's threads under a lock."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.RLock()
        existed = path.exists() and path.stat().st_size > 0
        try:
            self._con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=FULL")
            if existed:
                self._check()
            else:
                self._create()
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"state file {path} is corrupt or not an opsaudit state file ({exc}); "
                "it was left untouched: move it away to start a new dataset, or restore a backup"
            ) from None

    def _check(self) -> None:
        app_id = self._con.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            raise StorageError(
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

    def _create(self) -> None:
        with self.transaction() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            con.execute("INSERT INTO meta VALUES ('format', 'opsaudit-state')")
            con.execute("INSERT INTO meta VALUES ('format_version', ?)", (str(FORMAT_VERSION),))
        self._con.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
        with self._lock:
            return self._con.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._con.close()

    # -- reads ----------------------------------------------------------------------------

    def load_checkpoint(self, project_id: str) -> ProjectCheckpoint:
        rows = self.query(
            "SELECT checkpoint_us, boundary_ids, walk_top_us, walk_top_ids, resume_cursor "
            "FROM projects WHERE id = ?",
            (project_id,),
        )
        cp = ProjectCheckpoint(project_id)
        if rows:
            cp.checkpoint_us, boundary, cp.walk_top_us, top_ids, cp.resume_cursor = rows[0]
            cp.boundary_ids = _ids(boundary)
            cp.walk_top_ids = _ids(top_ids)
        for row in self.query(
            "SELECT id, project_id, created_us, status, fingerprint, version, checked_us "
            "FROM open_ops WHERE project_id = ?",
            (project_id,),
        ):
            cp.open_ops[row[0]] = OpenOp(*row)
        return cp


class DataDirLock:
    """An exclusive lock on the data directory (flock: released by the OS if we are killed)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, wait: bool) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise LockHeldError(
                f"another opsaudit sync is running on this data directory (lock {self.path}); "
                "it exits by itself, or use --wait to queue behind it"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


__all__ = ["DataDirLock", "OpenOp", "ProjectCheckpoint", "StateDB", "ids_json"]
