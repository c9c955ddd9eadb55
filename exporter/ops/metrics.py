"""Prometheus metrics of the audit trail, in the textfile-collector format, written atomically.

node_exporter's textfile collector reads every `*.prom` file of a directory on each scrape; a
file caught half-written would be dropped or, worse, read with missing series. So the file is
written next to its target under a name the collector ignores, fsynced, and renamed over it.
The format is simple enough to write by hand (exposition format 0.0.4); the tests read it back
with the official `prometheus_client` parser.

Every value comes from the state database (runs, open operations) and the data (failures over
the last 24 h), so `sync --metrics-file` and `check --metrics-file` write the same series.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from exporter.core.layout import LOCK_FILE, STATE_FILE, has_state, replace_durably
from exporter.core.model import Outcome
from exporter.ops.check import FINDING_KINDS, CheckReport, last_success_us
from exporter.store.state import StateDB, settled_runs

__all__ = [
    "FAILURE_WINDOW",
    "Metric",
    "check_metrics",
    "collect_metrics",
    "render_metrics",
    "write_metrics",
]

UTC = dt.timezone.utc
FAILURE_WINDOW = dt.timedelta(hours=24)
OUTCOMES = tuple(str(outcome) for outcome in Outcome)


@dataclass
class Metric:
    """One metric family: a name, its help and type, and its samples (labels, value)."""

    name: str
    help: str
    type: str = "gauge"
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float | None, **labels: str) -> Metric:
        if value is not None:
            self.samples.append((labels, float(value)))
        return self


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render_metrics(metrics: Iterable[Metric]) -> str:
    """The exposition text: HELP and TYPE, then one line per sample."""
    out: list[str] = []
    for m in metrics:
        out.append(f"# HELP {m.name} {m.help.replace(chr(92), chr(92) * 2)}")
        out.append(f"# TYPE {m.name} {m.type}")
        for labels, value in m.samples:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            out.append(
                f"{m.name}{{{text}}} {_number(value)}" if text else f"{m.name} {_number(value)}"
            )
    return "\n".join(out) + "\n"


def write_metrics(path: Path, metrics: Sequence[Metric]) -> None:
    """Write the file atomically: a temporary sibling (not `*.prom`), fsync, rename."""
    text = render_metrics(metrics).encode("utf-8")
    # 0o644: node_exporter usually runs as another user.
    replace_durably(Path(path), lambda fh: fh.write(text), mode=0o644)


def _seconds(us: int | None) -> float | None:
    return None if us is None else us / 1e6


def collect_metrics(data_dir: Path, *, as_of: dt.datetime | None = None) -> list[Metric]:
    """The trail's metrics from `data_dir`'s state and data (nothing when there is no state)."""
    from exporter.events.outbox import SINKS, read_backlog  # pyarrow: only when the state is read

    now = as_of or dt.datetime.now(UTC)
    state_path = Path(data_dir) / STATE_FILE
    if not has_state(Path(data_dir)):
        return []
    state = StateDB(state_path, read_only=True)
    try:
        # Runs after `as_of` have not happened yet for a check replayed in the past.
        until = int((now - dt.datetime(1970, 1, 1, tzinfo=UTC)) / dt.timedelta(microseconds=1))
        # A run killed with kill -9 is `killed` here as in `status` (the next sync records it).
        runs = settled_runs(
            [r for r in state.runs_rows() if r.started_at <= until], Path(data_dir) / LOCK_FILE
        )
        open_ops = state.open_count()
        by_last_read = state.open_by_last_read(until)
        live = [p for p in state.projects_rows() if p.deleted_at is None]
        projects = len(live)
        backlog = read_backlog(state)
    finally:
        state.close()
    # The last run that ended, a killed one too (it has no finish time): with every run killed
    # (the OOM killer, a timeout), outcome="ok" must go to 0, as the README's alert expects.
    ended = [r for r in runs if r.outcome != Outcome.RUNNING]

    success = last_success_us(runs, live)

    metrics = [
        Metric(
            "opsaudit_last_success_timestamp_seconds",
            "Unix time the trail was last current: the last sync with outcome ok finished, or "
            "after budgeted runs the oldest project's last walk or idle listing (absent before).",
        ).add(_seconds(success)),
        Metric("opsaudit_open_operations", "Operations still open, re-read by each sync.").add(
            open_ops
        ),
        Metric("opsaudit_projects", "Projects in scope (deleted ones excluded).").add(projects),
        _per_sink(
            "opsaudit_events_pending",
            "Events in the outbox not yet delivered, per sink (file, webhook).",
            backlog.pending,
            SINKS,
        ),
        _per_sink(
            "opsaudit_events_delivered_total",
            "Events delivered over the dataset's life, per sink (file, webhook).",
            backlog.delivered,
            SINKS,
            kind="counter",
        ),
        _by_last_read(by_last_read),
    ]
    last = ended[-1] if ended else None
    if last is not None:
        metrics.append(_one_hot(last.outcome))
    # A killed run never finished: no finish time or duration, and no counts (those of its
    # last commit, 0 before any: "0 requests" of a run that made hundreds).
    if last is not None and last.finished_at is not None:
        metrics += [
            Metric("opsaudit_last_run_timestamp_seconds", "Unix time the last sync finished.").add(
                _seconds(last.finished_at)
            ),
            Metric(
                "opsaudit_last_run_duration_seconds", "Wall time of the last sync in seconds."
            ).add((last.finished_at - last.started_at) / 1e6),
            Metric("opsaudit_last_run_requests", "API requests made by the last sync.").add(
                last.requests
            ),
            Metric("opsaudit_last_run_responses_429", "429 responses the last sync received.").add(
                last.responses_429
            ),
            Metric("opsaudit_last_run_retries", "Requests the last sync retried.").add(
                last.retries
            ),
            Metric(
                "opsaudit_last_run_operations",
                "Operations the last sync found new or changed (kind label).",
            )
            .add(last.new_operations, kind="new")
            .add(last.changed_operations, kind="changed"),
            Metric(
                "opsaudit_last_run_projects",
                "Projects the last sync finished ok or failed (result label).",
            )
            .add(last.projects_ok, result="ok")
            .add(last.projects_failed, result="failed"),
        ]
    metrics += _failures(Path(data_dir), now)
    return metrics


def _per_sink(
    name: str, text: str, values: dict[str, int], sinks: Sequence[str], kind: str = "gauge"
) -> Metric:
    metric = Metric(name, text, kind)
    for sink in sinks:
        metric.add(values.get(sink, 0), sink=sink)
    return metric


def _by_last_read(counts: dict[str, int]) -> Metric:
    m = Metric(
        "opsaudit_open_operations_by_last_read",
        "Open operations by time since their last re-read (within label: 1h, 6h, 24h, 7d, older).",
    )
    for label, n in counts.items():
        m.add(n, within=label)
    return m


def _one_hot(outcome: str) -> Metric:
    m = Metric("opsaudit_last_run_outcome", "1 for the outcome of the last sync, 0 for the others.")
    for name in (*OUTCOMES, *([outcome] if outcome not in OUTCOMES else [])):
        m.add(1 if name == outcome else 0, outcome=name)
    return m


def _failures(data_dir: Path, now: dt.datetime) -> list[Metric]:
    """Per action, operations created in the last 24 h and how many of them failed."""
    from exporter.analytics.views import connect, execute  # DuckDB: only for what queries the views

    since = (now - FAILURE_WINDOW).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    until = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    con = connect(data_dir, only=("00_base.sql",))
    try:
        _, rows = execute(
            con,
            "SELECT action, count(*), count(*) FILTER (WHERE is_failed(failures_count)) "
            f"FROM operations WHERE created_at >= TIMESTAMPTZ '{since}+00' "
            f"AND created_at < TIMESTAMPTZ '{until}+00' GROUP BY action ORDER BY action",
        )
    finally:
        con.close()
    operations = Metric(
        "opsaudit_operations_24h", "Operations created in the last 24 hours, per action."
    )
    failed = Metric(
        "opsaudit_failed_operations_24h",
        "Operations created in the last 24 hours that failed at least once, per action.",
    )
    for action, count, failures in rows:
        # No action: an empty label (PromQL's "no label"), not Python's "None".
        label = "" if action is None else str(action)
        operations.add(count, action=label)
        failed.add(failures, action=label)
    return [operations, failed]


def check_metrics(report: CheckReport) -> list[Metric]:
    """The families `check --metrics-file` adds: findings per check, and one ok flag."""
    findings = Metric(
        "opsaudit_check_findings", "Findings of the last `opsaudit check`, per check."
    )
    for name in (*FINDING_KINDS, *sorted({f.check for f in report.findings} - set(FINDING_KINDS))):
        findings.add(sum(f.check == name for f in report.findings), check=name)
    return [*_check_verdict(report.ok, report.as_of), findings]


def unjudged_check_metrics(as_of: dt.datetime) -> list[Metric]:
    """What `check --metrics-file` writes when check could not judge (a damaged state, exit 6;
    no data directory, exit 2): not ok, or the last verdict stood in the file and an alert on
    `opsaudit_check_ok == 0` never fired; no findings series, none being known."""
    return _check_verdict(False, as_of)


def _check_verdict(ok: bool, as_of: dt.datetime) -> list[Metric]:
    return [
        Metric(
            "opsaudit_check_ok",
            "1 when the last `opsaudit check` found nothing; 0 when it found something or "
            "could not judge.",
        ).add(1 if ok else 0),
        Metric("opsaudit_check_timestamp_seconds", "Unix time of the last `opsaudit check`.").add(
            as_of.timestamp()
        ),
    ]
