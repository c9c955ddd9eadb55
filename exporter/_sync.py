"""`sync()`: discovery, concurrent project walks, the single committer, and the run summary.

Workers walk projects in parallel and hand `Chunk`s to one committer thread, which writes them
as Parquet and commits files and checkpoints in one state transaction (see `_storage`). Batching
chunks of many projects into one commit keeps files few when ten thousand projects each bring a
handful of operations; each project still commits on its own schedule, and a failing project
never holds back the others. Progress reaches the caller through an observer, never stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from exporter._client import ApiClient, RetryPolicy
from exporter._discovery import UNLISTED, Discovery, discover
from exporter._errors import ApiError, AuthError, ExitCode, OpsauditError, StorageError
from exporter._pacing import DEFAULT_MAX_RPS, Pacer
from exporter._records import versions_table
from exporter._state import ids_json
from exporter._storage import Dataset, StagedFile
from exporter._timeutil import to_micros
from exporter._walk import Chunk, ProjectWalk, WalkLimits, now_us

log = logging.getLogger("opsaudit.sync")

Observer = Callable[[str, dict[str, Any]], None]


@dataclass
class SyncConfig:
    """Everything one run needs; the CLI builds it from flags and environment variables."""

    data_dir: Path
    api_key: str
    base_url: str = "https://console.neon.tech/api/v2/"
    project_ids: list[str] | None = None  # --project: no listing
    org_ids: list[str] | None = None  # --org-id: list only these organizations
    max_rps: float | None = DEFAULT_MAX_RPS  # None or 0: no pacing
    concurrency: int = 4  # projects walked at once
    wait_for_lock: bool = False
    limits: WalkLimits = field(default_factory=WalkLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    commit_rows: int = 30_000  # commit once this many versions are waiting ...
    commit_seconds: float = 5.0  # ... or this long after the oldest waiting chunk
    compact: bool = True


@dataclass
class RunSummary:
    """What a sync did; `exit_code` is what the CLI exits with."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None = None
    outcome: str = "running"
    projects_total: int = 0
    projects_ok: int = 0
    projects_failed: int = 0
    projects_deleted: int = 0
    requests: int = 0
    responses_429: int = 0
    retries: int = 0
    new_operations: int = 0
    changed_operations: int = 0
    versions_written: int = 0
    pages: int = 0
    gets: int = 0
    open_operations: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # project id (or "") -> message
    error: str | None = None

    @property
    def exit_code(self) -> ExitCode:
        return {
            "ok": ExitCode.OK,
            "partial": ExitCode.PARTIAL,
            "auth_failed": ExitCode.AUTH,
        }.get(self.outcome, ExitCode.FATAL)

    def line(self) -> str:
        """The one-line summary printed at the end of a run."""
        secs = (self.finished_at - self.started_at).total_seconds() if self.finished_at else 0.0
        text = (
            f"sync {self.outcome}: {self.projects_ok}/{self.projects_total} projects, "
            f"{self.new_operations} new and {self.changed_operations} changed operations, "
            f"{self.requests} requests ({self.responses_429} throttled, {self.retries} retried) "
            f"in {secs:.1f}s"
        )
        if self.projects_failed:
            text += f"; {self.projects_failed} project(s) failed"
        return text


class _Committer(threading.Thread):
    """The only writer: turns queued chunks into committed Parquet files and state changes."""

    def __init__(self, dataset: Dataset, run_id: str, config: SyncConfig, notify: Observer):
        super().__init__(name="opsaudit-committer", daemon=True)
        self.dataset = dataset
        self.run_id = run_id
        self.config = config
        self.notify = notify
        # Bounded: a fast API cannot pile up unwritten rows (flat memory).
        self.queue: queue.Queue[Chunk | None] = queue.Queue(maxsize=2)
        self.partitions: set[str] = set()
        self.versions_written = 0
        self.error: BaseException | None = None
        self._seq = 0

    def submit(self, chunk: Chunk) -> None:
        if self.error is not None:
            raise StorageError(f"cannot commit: {self.error}")
        if chunk.ops:
            chunk.table = versions_table(
                chunk.ops,
                chunk.raws,
                chunk.created_us,
                chunk.versions,
                chunk.observed_us,
                self.run_id,
            )
            chunk.ops, chunk.raws = [], []
        self.queue.put(chunk)

    def close(self) -> None:
        self.queue.put(None)
        self.join()

    def run(self) -> None:
        waiting: list[Chunk] = []
        rows = 0
        oldest = 0.0
        done = False
        while not done:
            timeout = (
                None
                if not waiting
                else max(0.0, oldest + self.config.commit_seconds - time.monotonic())
            )
            try:
                item = self.queue.get(timeout=timeout)
            except queue.Empty:
                item = _TICK
            if item is None:
                done = True
            elif item is not _TICK:
                if not waiting:
                    oldest = time.monotonic()
                waiting.append(item)
                rows += item.rows
            due = (
                done
                or rows >= self.config.commit_rows
                or (waiting and time.monotonic() - oldest >= self.config.commit_seconds)
            )
            if waiting and due and self.error is None:
                try:
                    self._commit(waiting)
                except BaseException as exc:
                    log.error("commit failed: %s", exc)
                    self.error = exc
                waiting, rows = [], 0

    def _commit(self, chunks: list[Chunk]) -> None:
        tables = [c.table for c in chunks if c.table is not None]
        staged: list[StagedFile] = []
        if tables:
            self._seq += 1
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            staged = self.dataset.stage_versions(table, f"{self.run_id}-{self._seq:05d}")
        with self.dataset.state.transaction() as con:
            self.dataset.register_pending(con, staged, self.run_id)
            for c in chunks:
                _apply_chunk(con, c)
        self.dataset.publish(staged)
        written = sum(f.rows for f in staged)
        self.versions_written += written
        self.partitions.update(f.partition for f in staged)
        self.notify("committed", {"versions": written, "files": len(staged)})


_TICK = Chunk("")  # wakes the committer to check its timer


def _apply_chunk(con: Any, c: Chunk) -> None:
    if c.open_deletes:
        con.executemany("DELETE FROM open_ops WHERE id = ?", [(i,) for i in c.open_deletes])
    if c.open_upserts:
        con.executemany(
            "INSERT OR REPLACE INTO open_ops "
            "(id, project_id, created_us, status, fingerprint, version, checked_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (o.id, o.project_id, o.created_us, o.status, o.fingerprint, o.version, o.checked_us)
                for o in c.open_upserts.values()
            ],
        )
    if c.progress is not None:
        top, top_ids, cursor = c.progress
        con.execute(
            "UPDATE projects SET walk_top_us = ?, walk_top_ids = ?, resume_cursor = ? WHERE id = ?",
            (top, ids_json(top_ids), cursor, c.project_id),
        )
    if c.completed is not None:
        checkpoint, boundary = c.completed
        con.execute(
            "UPDATE projects SET checkpoint_us = ?, boundary_ids = ?, walk_top_us = NULL, "
            "walk_top_ids = NULL, resume_cursor = NULL, last_synced_us = ?, last_error = NULL "
            "WHERE id = ?",
            (checkpoint, ids_json(boundary), now_us(), c.project_id),
        )


def _ts(text: Any) -> int | None:
    try:
        return to_micros(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _record_projects(dataset: Dataset, found: Discovery, started: int) -> None:
    """Upsert the listing snapshot; mark projects that vanished from a complete listing."""
    with dataset.state.transaction() as con:
        for pid, p in found.projects.items():
            listed = not found.explicit and not p.get(UNLISTED)
            con.execute(
                "INSERT INTO projects (id, first_seen_us) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (pid, started),
            )
            if listed:
                con.execute(
                    "UPDATE projects SET name = ?, region_id = ?, pg_version = ?, "
                    "platform_id = ?, provisioner = ?, org_id = ?, owner_id = ?, "
                    "created_us = ?, updated_us = ?, raw = ?, last_seen_us = ?, deleted_us = NULL "
                    "WHERE id = ?",
                    (
                        p.get("name"),
                        p.get("region_id"),
                        p.get("pg_version") if isinstance(p.get("pg_version"), int) else None,
                        p.get("platform_id"),
                        p.get("provisioner"),
                        p.get("org_id"),
                        p.get("owner_id"),
                        _ts(p.get("created_at")),
                        _ts(p.get("updated_at")),
                        orjson.dumps(p).decode(),
                        started,
                        pid,
                    ),
                )
        if found.explicit or not found.complete:
            return
        scope_all = None in found.orgs_listed
        orgs = [o for o in found.orgs_listed if o is not None]
        present = list(found.projects)
        con.execute("CREATE TEMP TABLE IF NOT EXISTS _present (id TEXT PRIMARY KEY)")
        con.execute("DELETE FROM _present")
        con.executemany("INSERT OR IGNORE INTO _present VALUES (?)", [(i,) for i in present])
        where = "" if scope_all else f" AND org_id IN ({','.join('?' * len(orgs))})"
        con.execute(
            "UPDATE projects SET deleted_us = ? WHERE deleted_us IS NULL "
            "AND last_seen_us IS NOT NULL AND id NOT IN (SELECT id FROM _present)" + where,
            (started, *([] if scope_all else orgs)),
        )


def sync(config: SyncConfig, observer: Observer | None = None) -> RunSummary:
    """Run one sync of `config.data_dir`; never raises for a per-project failure.

    Raises `LockHeldError`, `StorageError` or `ConfigError` before anything is written; an
    authentication failure or a failed discovery is reported in the summary's outcome.
    """
    notify: Observer = observer or (lambda event, data: None)
    dataset = Dataset(config.data_dir, lock=True, wait=config.wait_for_lock)
    try:
        dataset.recover()
        return _run(dataset, config, notify)
    finally:
        dataset.close()


def _run(dataset: Dataset, config: SyncConfig, notify: Observer) -> RunSummary:
    started = now_us()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    summary = RunSummary(run_id, datetime.now(timezone.utc))
    with dataset.state.transaction() as con:
        con.execute(
            "INSERT INTO runs (run_id, started_us, outcome) VALUES (?, ?, 'running')",
            (run_id, started),
        )
    client = ApiClient(
        config.base_url,
        config.api_key,
        pacer=Pacer(config.max_rps),
        retry=config.retry,
        max_connections=max(4, config.concurrency * 2),
    )
    cancel = threading.Event()
    committer = _Committer(dataset, run_id, config, notify)
    try:
        try:
            found = discover(client, project_ids=config.project_ids, org_ids=config.org_ids)
        except AuthError as exc:
            summary.outcome, summary.error = "auth_failed", str(exc)
            return summary
        except ApiError as exc:
            summary.outcome, summary.error = "failed", f"discovery failed: {exc}"
            return summary
        _record_projects(dataset, found, started)
        pids = sorted(found.projects)
        summary.projects_total = len(pids)
        notify("discovered", {"projects": len(pids), "stats": client.stats})
        committer.start()
        lock = threading.Lock()

        def walk_one(pid: str) -> None:
            if cancel.is_set():
                return
            walk = ProjectWalk(
                client, dataset.state.load_checkpoint(pid), committer.submit, config.limits, cancel
            )
            error: str | None = None
            try:
                result = walk.run()
            except AuthError as exc:
                cancel.set()
                with lock:
                    summary.outcome, summary.error = "auth_failed", str(exc)
                return
            except (OpsauditError, InterruptedError) as exc:
                error, result = str(exc), walk.result
            with lock:
                summary.pages += result.pages
                summary.gets += result.gets
                summary.new_operations += result.new
                summary.changed_operations += result.changed
                if result.deleted:
                    summary.projects_deleted += 1
                    summary.projects_ok += 1
                elif error is None:
                    summary.projects_ok += 1
                else:
                    summary.projects_failed += 1
                    summary.errors[pid] = error
            if result.deleted:
                with dataset.state.transaction() as con:
                    con.execute(
                        "UPDATE projects SET deleted_us = COALESCE(deleted_us, ?) WHERE id = ?",
                        (now_us(), pid),
                    )
            elif error is not None:
                log.warning("project %s failed: %s", pid, error)
                with dataset.state.transaction() as con:
                    con.execute("UPDATE projects SET last_error = ? WHERE id = ?", (error, pid))
            notify(
                "project_done",
                {
                    "project_id": pid,
                    "new": result.new,
                    "changed": result.changed,
                    "error": error,
                    "stats": client.stats,
                    "rate": client.pacer.current_rps,
                },
            )

        with ThreadPoolExecutor(
            max(1, config.concurrency), thread_name_prefix="opsaudit-walk"
        ) as pool:
            for future in [pool.submit(walk_one, pid) for pid in pids]:
                future.result()
        committer.close()
        if committer.error is not None:
            raise StorageError(
                f"writing the dataset failed: {committer.error}"
            ) from committer.error
        _release_free_memory()
        if config.compact and committer.partitions:
            dataset.compact(committer.partitions)
            _release_free_memory()
        if summary.outcome == "running":
            if summary.projects_failed == 0:
                summary.outcome = "ok"
            elif summary.projects_ok == 0:
                summary.outcome = "failed"
            else:
                summary.outcome = "partial"
        return summary
    finally:
        if committer.is_alive():
            committer.close()
        summary.versions_written = committer.versions_written
        summary.requests = client.stats.requests
        summary.responses_429 = client.stats.responses_429
        summary.retries = client.stats.retries
        client.close()
        if summary.outcome == "running":
            summary.outcome = "failed"
        summary.finished_at = datetime.now(timezone.utc)
        summary.open_operations = dataset.state.query("SELECT count(*) FROM open_ops")[0][0]
        _finish_run(dataset, summary)


def _release_free_memory() -> None:
    """Hand memory freed by the walk back to the OS before the next phase (glibc only).

    The walk churns through millions of short-lived objects; glibc keeps the freed heap, so
    compaction and the views refresh would stack their peak on top of it.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _finish_run(dataset: Dataset, s: RunSummary) -> None:
    error = s.error or ("; ".join(f"{k}: {v}" for k, v in sorted(s.errors.items())[:20]) or None)
    with dataset.state.transaction() as con:
        con.execute(
            "UPDATE runs SET finished_us = ?, outcome = ?, projects_total = ?, projects_ok = ?, "
            "projects_failed = ?, requests = ?, responses_429 = ?, retries = ?, "
            "new_operations = ?, changed_operations = ?, versions_written = ?, error = ? "
            "WHERE run_id = ?",
            (
                now_us(),
                s.outcome,
                s.projects_total,
                s.projects_ok,
                s.projects_failed,
                s.requests,
                s.responses_429,
                s.retries,
                s.new_operations,
                s.changed_operations,
                s.versions_written,
                error,
                s.run_id,
            ),
        )
    from exporter._exports import export_tables

    export_tables(dataset)
