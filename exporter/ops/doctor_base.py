"""`doctor`'s report and the findings its two data-directory checks share: the state's format
and the last runs, said alike of a local state file (`doctor`) and of the state object of a
dataset on object storage (`doctor_lake`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from exporter.analytics.format import jsonable
from exporter.core.model import RunRow
from exporter.store.state import FORMAT_VERSION

__all__ = ["STALE_RUN", "DoctorFinding", "DoctorReport", "no_state_found", "runs_found"]

UTC = dt.timezone.utc
STALE_RUN = dt.timedelta(hours=2)  # as `opsaudit check --max-age`


@dataclass(frozen=True)
class DoctorFinding:
    """One check's result: `level` is ok, warn or error; `remedy` says what to do."""

    check: str
    level: str
    message: str
    remedy: str | None = None

    def line(self) -> str:
        fix = f" Fix: {self.remedy}" if self.remedy else ""
        return f"{self.level:<5} {self.check}: {self.message}{fix}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "level": self.level,
            "message": self.message,
            "remedy": self.remedy,
        }


@dataclass
class DoctorReport:
    """Every check's finding, in order; `ok` when none is an error."""

    findings: list[DoctorFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.level != "error" for f in self.findings)

    def add(self, check: str, level: str, message: str, remedy: str | None = None) -> None:
        self.findings.append(DoctorFinding(check, level, message, remedy))

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [f.as_dict() for f in self.findings]}


def no_state_found(report: DoctorReport) -> None:
    report.add("state", "ok", "no state yet (a new dataset)")
    report.add("runs", "warn", "no sync has run yet", "run `opsaudit sync`")


def format_found(report: DoctorReport, format_version: int, where: str = "") -> None:
    """The state's format as the file holds it (a reader migrates an older one in memory)."""
    report.add(
        "state",
        "ok",
        f"{where}state format {format_version} (this opsaudit reads {FORMAT_VERSION})",
    )


def runs_found(report: DoctorReport, runs: list[RunRow], now: dt.datetime) -> None:
    """The last run's finding: `runs` as a reader shows them (a killed run settled)."""
    if not runs:
        report.add("runs", "warn", "no sync has run yet", "run `opsaudit sync`")
        return
    latest = runs[-1]
    outcome, error = latest.outcome, latest.error
    when = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
        microseconds=latest.finished_at or latest.started_at
    )
    last = f"last run {jsonable(when)}: {outcome}"
    successes = [r.finished_at for r in runs if r.outcome == "ok" and r.finished_at is not None]
    if outcome != "ok":
        report.add(
            "runs",
            "warn",
            last + (f" ({error})" if error else ""),
            "read the errors above, or `opsaudit status`; the next sync retries",
        )
    elif now - when > STALE_RUN:
        report.add(
            "runs",
            "warn",
            f"{last}, more than 2 hours ago",
            "check that cron or the systemd timer runs `opsaudit sync`",
        )
    else:
        report.add("runs", "ok", f"{last}; {len(successes)} successful run(s) in all")
