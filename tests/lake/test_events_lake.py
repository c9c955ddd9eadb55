"""Events on object storage (issue 22): the outbox is in the state committed with the data, so
what one machine could not deliver, the next one delivers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from .conftest import Bucket, run_sync


def _events_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "events_testdata", Path(__file__).parents[1] / "events" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


events = _events_helpers()


def _rows(url: str, opts: list[str]) -> list[dict[str, Any]]:
    from exporter.store.lake import open_dataset

    snap = open_dataset(url, opts).snapshot("operation_versions")
    return [] if snap is None else snap.to_table().to_pylist()


def test_a_fresh_machine_delivers_what_the_last_could_not(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    import base64

    from exporter.events.outbox import EventsConfig

    url, opts = bucket.url("audit/events"), bucket.storage_options()
    sim = make_sim(seed=21, projects=2, days=1, ops_per_project_per_day=30)
    key = base64.b64decode(events.SECRET.split("_", 1)[1])
    down = EventsConfig(
        webhook_url=events.closed_port_url(),
        webhook_key=key,
        webhook_attempts=2,
        webhook_backoff=0.01,
        file=tmp_path / "machine-1.jsonl",
    )
    first = run_sync(sim, url, opts, events=down)
    assert first.outcome == "ok" and first.events_pending == 0  # nothing after no backfill
    for pid in sim.project_ids():
        ids = sim.add_operations(pid, 5, status="running", same_second=False)
        sim.advance(2)
        sim.update_operation(ids[0], status="failed", failures_count=1)
        sim.advance(2)
    second = run_sync(sim, url, opts, events=down)
    rows = _rows(url, opts)
    expected = {f"{r['id']}:{r['version']}" for r in rows if r["run_id"] != first.run_id}
    assert second.events_pending == len(expected) > 0
    # The file sink of that machine got them; its webhook did not.
    assert {e["id"] for e in events.file_events(tmp_path / "machine-1.jsonl")} == expected
    # Another machine (every lake run restores the state from the store), the receiver up.
    with events.start_receiver() as receiver:
        up = EventsConfig(webhook_url=receiver.url, webhook_key=key, webhook_backoff=0.01)
        third = run_sync(sim, url, opts, events=up)
        assert third.events_pending == 0
        assert receiver.ids() == expected
        assert all(r.valid for r in receiver.received)


def test_a_discarded_backlog_stays_discarded_on_another_machine(
    make_sim: Any, bucket: Bucket
) -> None:
    """`opsaudit discard-events` commits the outbox as a run does: a fresh machine (its state
    restored from the store) finds nothing waiting for the webhook."""
    import base64

    from click.testing import CliRunner

    from exporter.cli import cli
    from exporter.events.outbox import EventsConfig

    url, opts = bucket.url("audit/discard"), bucket.storage_options()
    sim = make_sim(seed=22, projects=1, days=1, ops_per_project_per_day=10)
    key = base64.b64decode(events.SECRET.split("_", 1)[1])
    down = EventsConfig(
        webhook_url=events.closed_port_url(),
        webhook_key=key,
        webhook_attempts=1,
        backfill=True,
    )
    first = run_sync(sim, url, opts, events=down)
    assert first.outcome == "ok" and first.events_pending == len(_rows(url, opts)) > 0
    args = ["discard-events", "--data-dir", url, "--sink", "webhook"]
    for item in opts:
        args += ["--storage-option", item]
    result = CliRunner().invoke(cli, args, prog_name="opsaudit")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"discarded {first.events_pending} event(s) waiting for the webhook"
    )
    with events.start_receiver() as receiver:
        up = EventsConfig(webhook_url=receiver.url, webhook_key=key, webhook_backoff=0.01)
        again = run_sync(sim, url, opts, events=up)
        assert (again.outcome, again.events_pending, receiver.ids()) == ("ok", 0, set())
