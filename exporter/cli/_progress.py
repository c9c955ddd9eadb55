"""The progress line a sync shows on a terminal (`sync`, `demo`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from exporter.api.client import RequestStats
    from exporter.engine.sync import ProjectResult


class Progress:
    """A one-line progress display on a TTY; silent otherwise (cron mails only the summary).

    Every event also goes to the `opsaudit.events` logger (one JSON line each with
    `--log-format json`).
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.total = 0
        self.done = 0
        self.ops = 0
        self.requests = 0
        self.throttled = 0
        self.rate = 0.0
        self.started = time.monotonic()
        self.log = logging.getLogger("opsaudit.events")
        self._lock = threading.Lock()  # events come from every worker thread

    def discovered(self, projects: int, stats: RequestStats) -> None:
        with self._lock:
            self.total = projects
            self._show("discovered", stats, {"projects": projects})

    def project_done(self, result: ProjectResult, stats: RequestStats, rate: float) -> None:
        walk = result.walk
        with self._lock:
            self.done += 1
            self.ops += walk.new + walk.changed
            self.rate = rate
            fields = {
                "project_id": walk.project_id,
                "new": walk.new,
                "changed": walk.changed,
                "error": result.error,
                "rate": rate,
            }
            self._show("project_done", stats, fields)

    def committed(self, versions: int, files: int) -> None:
        with self._lock:
            self._show("committed", None, {"versions": versions, "files": files})

    def _show(self, event: str, stats: RequestStats | None, fields: dict[str, Any]) -> None:
        if stats is not None:
            self.requests, self.throttled = stats.requests, stats.responses_429
        self.log.info(event, extra={"fields": {"event": event, **fields}})
        if self.enabled:
            elapsed = max(time.monotonic() - self.started, 1e-6)
            click.echo(
                f"\rprojects {self.done}/{self.total} | operations {self.ops:,} | "
                f"requests {self.requests:,} | 429s {self.throttled} | "
                f"{self.requests / elapsed:.1f} req/s   ",
                nl=False,
                err=True,
            )

    def finish(self) -> None:
        if self.enabled:
            click.echo("", err=True)


__all__ = ["Progress"]
