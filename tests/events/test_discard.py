"""`opsaudit discard-events`: what waits for a sink no longer given to `sync` is dropped on
request, and only that (events are never dropped otherwise: PRODUCT.md, events)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from exporter.cli import cli
from exporter.events.config import read_backlog
from exporter.events.webhook import read_webhook_secret
from exporter.store.state import StateDB

from .conftest import closed_port_url, file_events, sync_events, versions_after


def _backlog(data: Path) -> dict[str, int]:
    state = StateDB(data / "state.sqlite", read_only=True)
    try:
        return read_backlog(state).pending
    finally:
        state.close()


def _backlog_findings(data: Path, as_of: dt.datetime) -> list[str]:
    """`check`'s events_backlog messages, the oldest event's time as `{since}`."""
    from exporter.ops.check import run_check

    found = [
        f.message for f in run_check(data, as_of=as_of).findings if f.check == "events_backlog"
    ]
    return [re.sub(r"since \S+ \S+Z,", "since {since},", m) for m in found]


def _discard(data: Path, sink: str) -> Any:
    args = ["discard-events", "--data-dir", str(data), "--sink", sink]
    return CliRunner().invoke(cli, args, prog_name="opsaudit")


def test_a_dropped_sinks_backlog_is_discarded_and_the_other_sinks_kept(
    make_sim: Any, tmp_path: Path, secret_file: Path
) -> None:
    sim = make_sim(seed=33, projects=2, days=1, ops_per_project_per_day=8)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    events_file.mkdir()  # the file cannot be appended to: its events wait too
    webhook = {
        "webhook_url": closed_port_url(),
        "webhook_key": read_webhook_secret(secret_file),
        "webhook_attempts": 1,
    }
    first = sync_events(sim, data, backfill=True, file=events_file, **webhook)
    expected = versions_after(data, set())
    assert (first.outcome, first.events_pending) == ("ok", len(expected))
    assert _backlog(data) == {"file": len(expected), "webhook": len(expected)}
    n = len(expected)
    host = webhook["webhook_url"].split("/")[2]
    assert first.line().endswith(
        f"; 0 event(s) appended to {events_file}, 0 delivered to the webhook at {host}, {n} "
        f"waiting for the next run ({n} for the file, {n} for the webhook)"
    )

    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=3)
    assert _backlog_findings(data, later) == [
        f"{len(expected)} event(s) waiting for delivery ({len(expected)} for the file, "
        f"{len(expected)} for the webhook), the oldest since {{since}}, longer than --max-age "
        "2h: can the events file be appended to (a full or read-only disk, its permissions, a "
        "directory in its place)? is the webhook's receiver down? the next sync given the sinks "
        "retries them (a sink no longer used: `opsaudit discard-events --sink file|webhook`)"
    ]

    result = _discard(data, "webhook")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"discarded {len(expected)} event(s) waiting for the webhook")
    assert _backlog(data) == {"file": len(expected), "webhook": 0}
    assert _discard(data, "webhook").stdout == "no event waits for the webhook\n"
    # The file alone waits: no webhook to ask about; said "is the receiver down?".
    assert _backlog_findings(data, later) == [
        f"{n} event(s) waiting for delivery ({n} for the file), the oldest since {{since}}, "
        "longer than --max-age 2h: can the events file be appended to (a full or read-only "
        "disk, its permissions, a directory in its place)? the next sync given the sink retries "
        "them (a sink no longer used: `opsaudit discard-events --sink file`)"
    ]

    # The file, writable again, gets every event it waited for, once; the webhook none of them.
    events_file.rmdir()
    after = sync_events(sim, data, file=events_file)
    assert (after.outcome, after.events_pending) == ("ok", 0)
    assert sorted(e["id"] for e in file_events(events_file)) == sorted(expected)
    assert _backlog(data) == {"file": 0, "webhook": 0}
    state = StateDB(data / "state.sqlite", read_only=True)
    try:  # dropped, not delivered
        assert read_backlog(state).delivered == {"file": len(expected), "webhook": 0}
        assert state.query("SELECT count(*) FROM event_batches") == [(0,)]
    finally:
        state.close()


def test_discarding_needs_a_dataset_and_never_makes_one(tmp_path: Path) -> None:
    missing, empty = tmp_path / "none", tmp_path / "empty"
    empty.mkdir()
    result = _discard(missing, "file")
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        2,
        f"Error: --data-dir {missing} does not exist; run `opsaudit sync --data-dir {missing}` "
        "first, or point --data-dir (or $OPSAUDIT_DATA_DIR) at an existing dataset",
    )
    result = _discard(empty, "webhook")
    assert (result.exit_code, result.stderr) == (
        6,
        f"Error: no dataset in {empty} yet: run `opsaudit sync` first\n",
    )
    assert not missing.exists() and list(empty.iterdir()) == []
