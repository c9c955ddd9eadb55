"""Events (issue 22, PRODUCT.md "Events"): the outbox, the events file and the webhook."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from exporter.events.outbox import EventsConfig, parse_event_filter
from exporter.events.webhook import read_webhook_secret
from tests.killing import KillWindow

from .conftest import (
    SECRET,
    Receiver,
    child_env,
    closed_port_url,
    file_events,
    run_ids,
    sync_events,
    versions_after,
)

ROOT = Path(__file__).resolve().parents[2]


def _webhook(receiver: Receiver, secret_file: Path, **kwargs: Any) -> dict[str, Any]:
    return {
        "webhook_url": receiver.url,
        "webhook_key": read_webhook_secret(secret_file),
        "webhook_timeout": 0.5,
        **kwargs,
    }


def _changes(sim: Any, rng: random.Random) -> None:
    """New operations, and new states of running ones (changed in place)."""
    for pid in sim.project_ids():
        ids = sim.add_operations(pid, rng.randint(1, 4), status="running", same_second=False)
        sim.add_operations(pid, rng.randint(0, 3), same_second=False)
        sim.advance(2)
        for op_id in ids[: rng.randint(0, len(ids))]:
            sim.update_operation(
                op_id,
                status="failed",
                failures_count=1,
                error='boom: "quoted" \\ back\nslash\t\u00fc\x01',
            )
        sim.advance(2)


def _rfc3339(value: dt.datetime | None) -> str | None:
    if value is None:
        return None
    text = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text.removesuffix(".000000") + "Z"


def test_one_event_per_new_version_after_the_backfill(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    sim = make_sim(seed=5, projects=2, days=2, ops_per_project_per_day=40)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sinks = {"file": events_file, **_webhook(receiver, secret_file)}
    first = sync_events(sim, data, **sinks)
    assert first.outcome == "ok" and first.versions_written > 0
    assert first.events_delivered == 0 and first.events_pending == 0
    assert file_events(events_file) == [] and receiver.received == []
    _changes(sim, random.Random(3))
    second = sync_events(sim, data, **sinks)
    assert second.outcome == "ok"
    expected = versions_after(data, {first.run_id})
    assert len(expected) == second.versions_written > 0
    events = file_events(events_file)
    assert [e["id"] for e in events] == sorted(
        (e["id"] for e in events), key=[e["id"] for e in events].index
    )
    assert sorted(e["id"] for e in events) == sorted(expected)
    # Events, not deliveries: one the file and the webhook took is one (it said twice their number).
    assert second.events_delivered == len(expected) and second.events_pending == 0
    assert second.events_delivered_by_sink == {"file": len(expected), "webhook": len(expected)}
    # The exact shape: the row's columns under the API's names, RFC 3339 UTC, the names.
    names = {p: sim.world.live_project(p).meta["name"] for p in sim.project_ids()}
    # The API's names now (nothing was renamed since the backfill listed them; a branch deleted
    # before that was never listed: null); an unnamed compute has no `name`: null.
    branch_names = {b["id"]: b["name"] for p in sim.project_ids() for b in sim.branches(p)}
    endpoint_names = {e["id"]: e.get("name") for p in sim.project_ids() for e in sim.endpoints(p)}
    got_names = {(e["data"]["branch_name"], e["data"]["endpoint_name"]) for e in events}
    assert any(b for b, _ in got_names) and {e is None for _, e in got_names} == {True, False}
    for event in events:
        row = expected[event["id"]]
        assert event["type"] == (
            "operation.created" if row["version"] == 1 else "operation.changed"
        )
        assert event["timestamp"] == _rfc3339(row["observed_at"])
        api = [
            "id",
            "project_id",
            "branch_id",
            "endpoint_id",
            "action",
            "status",
            "failures_count",
            "error",
            "retry_at",
            "created_at",
            "updated_at",
            "total_duration_ms",
            "version",
        ]
        want = {
            k: _rfc3339(v) if isinstance(v, dt.datetime) else v for k, v in row.items() if k in api
        }
        assert orjson.loads(row["raw"])["id"] == want["id"]
        want |= {
            "project_name": names[row["project_id"]],
            "branch_name": branch_names.get(row["branch_id"]),
            "endpoint_name": endpoint_names.get(row["endpoint_id"]),
        }
        assert event["data"] == want
        assert set(event) == {"id", "type", "timestamp", "data"}
    # The webhook got the same events, byte for byte the file's lines, each signed: the file's
    # built at commit, the webhook's at delivery from the committed rows and the names
    # recorded at commit (outbox `facts`).
    assert {r.id for r in receiver.received} == set(expected)
    assert all(r.valid for r in receiver.received) and not receiver.bad_requests
    lines = {orjson.loads(line)["id"]: line for line in events_file.read_bytes().splitlines()}
    assert all(r.body == lines[r.id] for r in receiver.received)


def test_events_backfill_emits_the_first_walk(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=6, projects=2, days=1, ops_per_project_per_day=30)
    events_file = tmp_path / "events.jsonl"
    # A commit per chunk: names that came after the rows would be a commit late.
    summary = sync_events(sim, tmp_path / "data", file=events_file, backfill=True, commit_seconds=0)
    events = file_events(events_file)
    ids = [e["id"] for e in events]
    assert sorted(ids) == sorted(versions_after(tmp_path / "data", set()))
    assert len(ids) == summary.versions_written > 0
    # The first walk lists the project's branches and computes: its events carry their names.
    branches = {b["id"]: b["name"] for p in sim.project_ids() for b in sim.branches(p)}
    endpoints = {e["id"]: e.get("name") for p in sim.project_ids() for e in sim.endpoints(p)}
    got = [(e["data"]["branch_name"], e["data"]["endpoint_name"]) for e in events]
    assert got == [
        (branches.get(e["data"]["branch_id"]), endpoints.get(e["data"]["endpoint_id"]))
        for e in events
    ]
    assert sum(b is not None for b, _ in got) > len(got) // 2


def test_the_run_returns_once_its_delivery_alongside_the_record_is_done(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """On a local directory the end-of-run delivery goes on alongside the run's record and the
    views database; the run returns only once it is done, its summary counting every event."""
    sim = make_sim(seed=41, projects=1, days=1, ops_per_project_per_day=4)
    receiver.fail_first = 1  # every event waits one backoff (1 s) within the run
    data = tmp_path / "data"
    hook = _webhook(receiver, secret_file, webhook_backoff=1.0)
    summary = sync_events(sim, data, backfill=True, file=tmp_path / "events.jsonl", **hook)
    expected = versions_after(data, set())
    assert summary.events_pending == 0
    assert summary.events_delivered == len(expected) > 0
    assert summary.events_delivered_by_sink == {"file": len(expected), "webhook": len(expected)}
    assert sorted(receiver.ids()) == sorted(expected)
    assert sorted(e["id"] for e in file_events(tmp_path / "events.jsonl")) == sorted(expected)


def test_a_branch_first_listed_in_the_same_run_names_its_events(
    make_sim: Any, tmp_path: Path
) -> None:
    # PRODUCT.md, Events: the names where known. A branch the walk meets for the first time is
    # listed in that same run, so its operations' events carry its name (they carried null
    # when the listing was committed after the operations).
    sim = make_sim(seed=8, projects=2, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    assert sync_events(sim, data, file=events_file).outcome == "ok"
    pid = sim.project_ids()[1]
    branch_id, endpoint_id, op_ids = sim.add_branch(pid, "preview/pr-7")
    second = sync_events(sim, data, file=events_file, commit_seconds=0)  # a commit per chunk
    assert second.outcome == "ok" and second.new_operations >= 2
    endpoint_name = {e["id"]: e.get("name") for e in sim.endpoints(pid)}[endpoint_id]
    events = {e["id"]: e["data"] for e in file_events(events_file)}
    got = {
        events[f"{op}:1"]["action"]: (
            events[f"{op}:1"]["branch_id"],
            events[f"{op}:1"]["branch_name"],
            events[f"{op}:1"]["endpoint_name"],
        )
        for op in op_ids
    }
    assert got == {
        "create_branch": (branch_id, "preview/pr-7", None),
        "start_compute": (branch_id, "preview/pr-7", endpoint_name),
    }


def test_a_backlog_reaches_the_file_before_the_new_events(make_sim: Any, tmp_path: Path) -> None:
    # The file follows each commit (appended right after it) only once the backlog is in it:
    # the file stays in commit order, each event once.
    sim = make_sim(seed=9, projects=2, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "later" / "events.jsonl"
    backfill = sync_events(sim, data, file=events_file)
    _changes(sim, random.Random(4))
    waiting = sync_events(sim, data, file=events_file)  # no such directory: the events wait
    assert waiting.outcome == "ok" and waiting.events_delivered == 0
    assert waiting.events_pending == waiting.versions_written > 0
    events_file.parent.mkdir()
    _changes(sim, random.Random(5))
    last = sync_events(sim, data, file=events_file)
    assert last.outcome == "ok" and last.events_pending == 0
    old = versions_after(data, {backfill.run_id, last.run_id})
    new = versions_after(data, {backfill.run_id, waiting.run_id})
    assert last.events_delivered == len(old) + len(new) and len(new) == last.versions_written
    ids = [e["id"] for e in file_events(events_file)]
    assert sorted(ids[: len(old)]) == sorted(old) and sorted(ids[len(old) :]) == sorted(new)


def test_events_filter_keeps_only_matching_actions_and_statuses(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=8, projects=1, days=1, ops_per_project_per_day=60)
    events_file = tmp_path / "events.jsonl"
    filters = [
        parse_event_filter("status!=finished,skipped"),
        parse_event_filter("action=start_compute,suspend_compute,create_branch"),
    ]
    sync_events(sim, tmp_path / "data", file=events_file, backfill=True, filters=filters)
    rows = versions_after(tmp_path / "data", set())
    want = {
        k
        for k, r in rows.items()
        if r["status"] not in ("finished", "skipped")
        and r["action"] in ("start_compute", "suspend_compute", "create_branch")
    }
    assert want, "the world has no matching operation: the test would prove nothing"
    assert sorted(e["id"] for e in file_events(events_file)) == sorted(want)
    with pytest.raises(Exception, match="is not a filter"):
        parse_event_filter("region=us")


def test_webhook_retries_failures_hangs_and_drops_within_the_run(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    sim = make_sim(seed=9, projects=1, days=1, ops_per_project_per_day=20)
    receiver.fail_first = 1  # every event's first attempt fails ...
    receiver.weights = {"ok": 0.6, "hang": 0.15, "drop": 0.25}  # ... and later ones often
    receiver.hang_seconds = 1.0
    summary = sync_events(
        sim,
        tmp_path / "data",
        backfill=True,
        **_webhook(receiver, secret_file, webhook_attempts=40),
    )
    expected = versions_after(tmp_path / "data", set())
    assert summary.events_pending == 0
    assert receiver.ids() == set(expected)
    # Retried under the same id: every event was attempted at least twice.
    assert all(receiver.attempts.count(i) >= 2 for i in expected)
    assert all(r.valid for r in receiver.received)


def test_receiver_down_for_a_whole_run_loses_nothing_and_check_reports_it(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    from exporter.ops.check import run_check
    from exporter.ops.metrics import collect_metrics, render_metrics
    from exporter.ops.status import read_status, render_status

    sim = make_sim(seed=10, projects=2, days=1, ops_per_project_per_day=20)
    data = tmp_path / "data"
    key = read_webhook_secret(secret_file)
    down = {"webhook_url": closed_port_url(), "webhook_key": key, "webhook_attempts": 3}
    first = sync_events(sim, data, backfill=True, **down)
    expected = versions_after(data, set())
    assert first.outcome == "ok" and first.exit_code == 0
    assert first.events_pending == len(expected) > 0 and first.events_delivered == 0
    assert f"{len(expected)} waiting for the next run" in first.line()
    # Young backlog: no finding; older than --max-age: one.
    assert not [f for f in run_check(data).findings if f.check == "events_backlog"]
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=3)
    findings = [f for f in run_check(data, as_of=later).findings if f.check == "events_backlog"]
    assert len(findings) == 1 and f"{len(expected)} event(s)" in findings[0].message
    assert f"({len(expected)} for the webhook)" in findings[0].message
    assert findings[0].message.endswith(
        "2h: is the webhook's receiver down? the next sync given the sink retries them (a sink "
        "no longer used: `opsaudit discard-events --sink webhook`)"
    )
    status = read_status(data)
    assert status.events["pending"] == {"file": 0, "webhook": len(expected)}
    assert f"events waiting for delivery: {len(expected)} for the webhook" in render_status(
        status, "table"
    )
    metrics = render_metrics(collect_metrics(data))
    assert f'opsaudit_events_pending{{sink="webhook"}} {len(expected)}\n' in metrics
    assert 'opsaudit_events_delivered_total{sink="webhook"} 0\n' in metrics
    # The next run, receiver up: everything, in order per operation.
    second = sync_events(sim, data, **_webhook(receiver, secret_file))
    assert second.events_pending == 0
    assert receiver.ids() == set(expected)
    _assert_in_order(receiver)
    assert not [f for f in run_check(data, as_of=later).findings if f.check == "events_backlog"]
    assert read_status(data).events["pending"] == {"file": 0, "webhook": 0}
    metrics = render_metrics(collect_metrics(data))
    assert 'opsaudit_events_pending{sink="webhook"} 0\n' in metrics
    assert f'opsaudit_events_delivered_total{{sink="webhook"}} {len(expected)}\n' in metrics


def test_events_built_at_delivery_are_the_bytes_built_at_commit(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    # The file follows the commits (JSON built in the commit); the webhook, down in the first
    # run, gets the same events in the next one, built from the committed rows: months of
    # operations, so a commit's rows are read back from several files in another order.
    sim = make_sim(seed=21, projects=2, days=75, ops_per_project_per_day=2)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    key = read_webhook_secret(secret_file)
    down = {"webhook_url": closed_port_url(), "webhook_key": key, "webhook_attempts": 1}
    first = sync_events(sim, data, file=events_file, backfill=True, **down)
    expected = versions_after(data, set())
    months = {row["created_at"].strftime("%Y-%m") for row in expected.values()}
    assert len(months) >= 3 and first.events_pending == len(expected) > 0
    lines = {orjson.loads(line)["id"]: line for line in events_file.read_bytes().splitlines()}
    assert sorted(lines) == sorted(expected)
    second = sync_events(sim, data, **_webhook(receiver, secret_file))
    assert second.events_pending == 0 and sorted(receiver.ids()) == sorted(expected)
    assert all(r.body == lines[r.id] for r in receiver.received)
    _assert_in_order(receiver)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_a_commit_of_many_events_is_recorded_in_bounded_outbox_rows(
    make_sim: Any,
    tmp_path: Path,
    receiver: Receiver,
    secret_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One commit of a whole backfill (rows written ahead), its events in outbox rows of at
    # most ROW_EVENTS: each row's events carry their own projects' names, in the file (built
    # from the rows the commit had in hand, PIECE_EVENTS at a time) and at the webhook (built
    # from the files later).
    import sqlite3

    from exporter.events import outbox

    monkeypatch.setattr(outbox, "ROW_EVENTS", 7)
    monkeypatch.setattr(outbox, "PIECE_EVENTS", 3)
    sim = make_sim(seed=22, projects=3, days=20, ops_per_project_per_day=2)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    key = read_webhook_secret(secret_file)
    down = {"webhook_url": closed_port_url(), "webhook_key": key, "webhook_attempts": 1}
    first = sync_events(sim, data, file=events_file, backfill=True, commit_seconds=60, **down)
    expected = versions_after(data, set())
    con = sqlite3.connect(data / "state.sqlite")
    try:
        names = dict(con.execute("SELECT id, name FROM projects").fetchall())
        outbox_rows = con.execute("SELECT events, ids FROM event_batches ORDER BY seq").fetchall()
    finally:
        con.close()
    assert first.events_pending == len(expected) > 3 * 7
    assert [n for n, _ in outbox_rows] == [7] * (len(expected) // 7) + (
        [len(expected) % 7] if len(expected) % 7 else []
    )
    events = file_events(events_file)
    # In the commit's order, as recorded (the tail reconciliation relies on it).
    assert [e["id"] for e in events] == "\n".join(_text(ids) for _, ids in outbox_rows).split("\n")
    assert sorted(e["id"] for e in events) == sorted(expected)
    assert len({e["data"]["project_id"] for e in events}) >= 3
    assert all(e["data"]["project_name"] == names[e["data"]["project_id"]] for e in events)
    lines = {orjson.loads(line)["id"]: line for line in events_file.read_bytes().splitlines()}
    second = sync_events(sim, data, **_webhook(receiver, secret_file))
    assert second.events_pending == 0 and sorted(receiver.ids()) == sorted(expected)
    assert all(r.body == lines[r.id] for r in receiver.received)


def test_events_built_at_delivery_after_compaction_moved_their_rows(
    make_sim: Any,
    tmp_path: Path,
    receiver: Receiver,
    secret_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two runs' events wait for the webhook while compaction merges the files that hold their
    rows: the next run finds each row by its run id in the merged files and sends the bytes the
    file got at commit time."""
    import exporter.store.local.dataset as local_dataset
    from exporter.engine.publish import compact
    from exporter.store.opener import open_store

    sim = make_sim(seed=22, projects=2, days=75, ops_per_project_per_day=2)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    key = read_webhook_secret(secret_file)
    down = {"webhook_url": closed_port_url(), "webhook_key": key, "webhook_attempts": 1}
    sync_events(sim, data, file=events_file, backfill=True, **down)
    _changes(sim, random.Random(22))
    second = sync_events(sim, data, file=events_file, **down)
    expected = versions_after(data, set())
    assert second.events_pending == len(expected) > 0
    monkeypatch.setattr(local_dataset, "COMPACT_MIN_FILES", 2)
    store = open_store(data, (), lock=True, wait=False)
    try:
        assert compact(store) > 0
    finally:
        store.close()
    lines = {orjson.loads(line)["id"]: line for line in events_file.read_bytes().splitlines()}
    assert sorted(lines) == sorted(expected)
    third = sync_events(sim, data, **_webhook(receiver, secret_file))
    assert third.events_pending == 0 and sorted(receiver.ids()) == sorted(expected)
    assert all(r.body == lines[r.id] for r in receiver.received)
    _assert_in_order(receiver)


def test_a_committed_file_gone_while_events_wait_is_a_storage_error_then_delivered(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """Events built at delivery need their committed rows: a versions file moved away is the
    storage error it is (exit 6, what to do), not a bug's exit 5; put back, nothing is lost."""
    from exporter.core.errors import StorageError

    sim = make_sim(seed=23, projects=2, days=3, ops_per_project_per_day=20)
    data = tmp_path / "data"
    key = read_webhook_secret(secret_file)
    down = {"webhook_url": closed_port_url(), "webhook_key": key, "webhook_attempts": 1}
    first = sync_events(sim, data, backfill=True, **down)
    expected = versions_after(data, set())
    assert first.events_pending == len(expected) > 0
    moved = sorted((data / "operation_versions").rglob("*.parquet"))[0]
    aside = tmp_path / "aside.parquet"
    moved.rename(aside)
    with pytest.raises(StorageError, match="changed outside opsaudit") as failed:
        sync_events(sim, data, **_webhook(receiver, secret_file))
    assert failed.value.exit_code == 6 and receiver.ids() == set()
    # The delivery went on alongside the run's record: the record says failed all the same,
    # in the state and in the exported sync_runs.
    second = run_ids(data)[-1]
    con = sqlite3.connect(data / "state.sqlite")
    try:
        [(outcome, error)] = con.execute(
            "SELECT outcome, error FROM runs WHERE run_id = ?", (second,)
        ).fetchall()
    finally:
        con.close()
    assert outcome == "failed" and "changed outside opsaudit" in error
    exported = pq.read_table(data / "sync_runs" / "sync_runs.parquet").to_pylist()
    assert [r["outcome"] for r in exported if r["run_id"] == second] == ["failed"]
    aside.rename(moved)
    third = sync_events(sim, data, **_webhook(receiver, secret_file))
    assert third.events_pending == 0 and sorted(receiver.ids()) == sorted(expected)
    _assert_in_order(receiver)


def _assert_in_order(receiver: Receiver) -> None:
    """Per operation, each version first arrives after every earlier version did."""
    seen: dict[str, set[int]] = {}
    for r in receiver.received:
        op_id, _, version = r.id.rpartition(":")
        got = seen.setdefault(op_id, set())
        got.add(int(version))
    first_arrival: dict[str, list[int]] = {}
    for r in receiver.received:
        op_id, _, version = r.id.rpartition(":")
        order = first_arrival.setdefault(op_id, [])
        if int(version) not in order:
            order.append(int(version))
    for op_id, order in first_arrival.items():
        assert order == sorted(order), f"{op_id}: versions arrived as {order}"


def test_torn_last_line_is_repaired(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=11, projects=1, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    first = sync_events(sim, data, file=events_file, backfill=True)
    # A kill in the middle of an append leaves half a line (and its event not marked).
    with events_file.open("ab") as fh:
        fh.write(b'{"id":"half-written-event:1","type":"operation.crea')
    _changes(sim, random.Random(4))
    sync_events(sim, data, file=events_file)
    ids = [e["id"] for e in file_events(events_file)]
    assert sorted(ids) == sorted(versions_after(data, set())) and first.versions_written


def _python_sync(sim: Any, data: Path, events_file: Path, patch: str) -> int:
    """A sync in a child process whose `patch` (Python) kills it at a chosen instant."""
    code = (
        "import os, signal, sys\n"
        f"{patch}\n"
        "from exporter.cli import main\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0']\n"
        "main()\n"
    )
    env = child_env(sim, data, events_file)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    return proc.returncode


def test_kill_after_append_before_the_mark_does_not_repeat_lines(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=12, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sync_events(sim, data, file=events_file)
    _changes(sim, random.Random(5))
    # Every path that marks appended events goes through mark_file (the end-of-run delivery,
    # and the file following the commits, which marks in the next commit or at the end).
    patch = (
        "import exporter.events.outbox as o\n"
        "def killed(*args): os.kill(os.getpid(), signal.SIGKILL)\n"
        "o.Outbox.mark_file = killed\n"
    )
    assert _python_sync(sim, data, events_file, patch) == -signal.SIGKILL
    appended = [e["id"] for e in file_events(events_file)]
    assert appended, "the kill came before the append: the test would prove nothing"
    sync_events(sim, data, file=events_file)
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids)), "an event was appended twice"
    assert sorted(ids) == sorted(versions_after(data, set(run_ids(data)[:1])))


def test_kill_in_the_middle_of_an_append_then_a_healthy_run(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=18, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sync_events(sim, data, file=events_file)
    _changes(sim, random.Random(9))
    # The append stops half way through its data (mid-line), and the process dies.
    patch = (
        "import types\n"
        "import exporter.core.layout as layout\n"
        "def half(fd, data):\n"
        "    os.write(fd, bytes(data[: len(data) // 2]))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "layout.os = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) "
        "if not k.startswith('__')})\n"
        "layout.os.write = half\n"
    )
    assert _python_sync(sim, data, events_file, patch) == -signal.SIGKILL
    torn = events_file.read_bytes()
    assert torn.count(b"\n") >= 2 and not torn.endswith(b"\n"), "no torn append to test"
    sync_events(sim, data, file=events_file)
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids)), "an event was appended twice"
    assert sorted(ids) == sorted(versions_after(data, set(run_ids(data)[:1])))


def test_kill_right_after_the_commit_loses_no_event(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=13, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sync_events(sim, data, file=events_file)
    _changes(sim, random.Random(6))
    # Dies as the first commit with rows returns from its state transaction (before publish).
    patch = (
        "import exporter.store.local.dataset as s\n"
        "def killed(self, files):\n"
        "    if list(files): os.kill(os.getpid(), signal.SIGKILL)\n"
        "s.Dataset.publish = killed\n"
    )
    assert _python_sync(sim, data, events_file, patch) == -signal.SIGKILL
    assert file_events(events_file) == []
    sync_events(sim, data, file=events_file)
    ids = [e["id"] for e in file_events(events_file)]
    expected = versions_after(data, set(run_ids(data)[:1]))
    assert expected and sorted(ids) == sorted(expected)


def _start_sync(sim: Any, data: Path, events_file: Path, url: str, secret: Path) -> Any:
    env = child_env(
        sim, data, events_file, OPSAUDIT_WEBHOOK_URL=url, OPSAUDIT_WEBHOOK_SECRET_FILE=str(secret)
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--max-rps",
            "0",
            "--wait",
            "--webhook-timeout",
            "0.3",
            "--webhook-attempts",
            "3",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# `await` (the second Ctrl-C after the record) is gone: the first Ctrl-C now ends the delivery
# at once, and the second came after the exit (a process killed by SIGINT at its end). A
# delivery deaf to the stop: `test_a_second_ctrl_c_awaits_a_delivery_that_does_not_stop_at_once`.
@pytest.mark.parametrize("phase", ["record"])
def test_ctrl_c_twice_at_the_run_end_stops_the_delivery_before_the_lock_is_released(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path, phase: str
) -> None:
    """A second Ctrl-C while the delivery goes on alongside the run's record (`record`: the
    views database being written): the webhook stops and the sync exits 130 once the delivery
    ended, never with it still writing the events file and the state after the dataset's close
    (its lock released, another run could start)."""
    sim = make_sim(seed=42, projects=2, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    receiver.mode, receiver.hang_seconds = "hang", 3.0  # every attempt: no answer within 3 s
    slow_record = (
        "import exporter.engine.publish as p, time\n"
        "views = p.refresh_views_database\n"
        "def slow(dataset):\n"
        "    time.sleep(5)\n"
        "    return views(dataset)\n"
        "p.refresh_views_database = slow\n"
    )
    code = (
        "import sys, threading\n"
        "import exporter.store.local.dataset as s\n"
        + (slow_record if phase == "record" else "")
        + "closing = s.Dataset.close\n"
        "def close(self):\n"
        "    alive = [t.name for t in threading.enumerate() if t.name.startswith('opsaudit-')]\n"
        "    closing(self)\n"
        "    sys.stderr.write(f'running at close: {sorted(alive)}\\n')\n"
        "s.Dataset.close = close\n"
        "from exporter.cli import main\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0', '--events-backfill',\n"
        "            '--webhook-timeout', '10']\n"
        "main()\n"
    )
    env = child_env(
        sim,
        data,
        events_file,
        OPSAUDIT_WEBHOOK_URL=receiver.url,
        OPSAUDIT_WEBHOOK_SECRET_FILE=str(secret_file),
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        # `await`: the views database is written, the run waits for its delivery.
        while time.monotonic() < deadline and not (
            receiver.attempts and (phase == "record" or (data / "opsaudit.duckdb").exists())
        ):
            time.sleep(0.02)
        assert receiver.attempts and proc.poll() is None
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        aborted = time.monotonic()
        _, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - aborted
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert b"running at close: []\n" in err, err
    # Stopped after the attempt in flight (3 s), not after every attempt (6, backoff: ~30 s).
    assert elapsed < 9, f"{elapsed:.1f}s from the second Ctrl-C to the exit"
    receiver.mode = "ok"
    last = sync_events(sim, data, file=events_file, **_webhook(receiver, secret_file))
    expected = sorted(versions_after(data, set()))
    assert last.outcome == "ok" and last.events_pending == 0 and expected
    assert sorted(e["id"] for e in file_events(events_file)) == expected
    assert sorted(receiver.ids()) == expected


@pytest.mark.parametrize("phase", ["record", "await"])
def test_a_second_ctrl_c_awaits_a_delivery_that_does_not_stop_at_once(
    make_sim: Any, tmp_path: Path, phase: str
) -> None:
    """The first Ctrl-C stops the delivery at its next step; one busy for a while (here 3 s,
    deaf to the stop) is still awaited through a second Ctrl-C, while the run is recorded
    (`record`: the views database written meanwhile) or after (`await`): the dataset's close,
    which releases the lock, comes after it, and the abort is raised (no summary). CPython
    3.11's `Thread.join`, cut by the Ctrl-C, took the delivery for ended."""
    sim = make_sim(seed=43, projects=2, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    started = tmp_path / "delivering"
    code = (
        "import sys, threading, time\n"
        "import exporter.engine.sync as S\n"
        "import exporter.store.local.dataset as s\n"
        "deliver = S._Run._deliver\n"
        "def busy(self, *args):\n"
        f"    open({str(started)!r}, 'w').close()\n"
        "    time.sleep(3.0)\n"
        "    return deliver(self, *args)\n"
        "S._Run._deliver = busy\n"
        + (
            "import exporter.engine.publish as p\n"
            "views = p.refresh_views_database\n"
            "def slow(dataset):\n"
            "    time.sleep(1.0)\n"
            "    return views(dataset)\n"
            "p.refresh_views_database = slow\n"
            if phase == "record"
            else ""
        )
        + "closing = s.Dataset.close\n"
        "def close(self):\n"
        "    alive = [t.name for t in threading.enumerate() if t.name == 'opsaudit-deliver']\n"
        "    closing(self)\n"
        "    sys.stderr.write(f'delivering at close: {alive}\\n')\n"
        "s.Dataset.close = close\n"
        "from exporter.cli import main\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0', '--events-backfill']\n"
        "main()\n"
    )
    env = child_env(sim, data, events_file)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        # `await`: once the views database is written, the run only awaits its delivery.
        while time.monotonic() < deadline and not (
            started.exists() and (phase == "record" or (data / "opsaudit.duckdb").exists())
        ):
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, out) == (130, b""), err  # aborted: no summary
    assert b"delivering at close: []\n" in err, err


@pytest.mark.slow
def test_kill_9_at_random_instants_then_a_healthy_run(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    from exporter.simulator import Faults

    sim = make_sim(seed=14, projects=4, days=2, ops_per_project_per_day=300)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    first = sync_events(sim, data, file=events_file, **_webhook(receiver, secret_file))
    assert first.outcome == "ok"
    sim.faults = Faults(p_slow=0.3, slow_seconds=0.02, seed=4)
    receiver.weights = {"ok": 0.85, "fail": 0.05, "hang": 0.05, "drop": 0.05}
    receiver.hang_seconds = 0.5
    rng = random.Random(99)
    # Two kinds of kill, alternating. At a seeded instant: wherever the run happens to be then
    # (walking, committing, appending, delivering; a run may also finish first). And by the
    # receiver at its k-th attempt of the run (k <= 3): always while the webhook delivers,
    # leaving an unanswered event to deliver again. The kill always comes, as the webhook stops
    # a run only after an event's 3 attempts failed.
    timed_kills = receiver_kills = 0
    when = KillWindow(rng, 0.3, 4.0)
    for n in range(36):
        if timed_kills >= 5 and receiver_kills >= 6:
            break
        by_receiver = receiver_kills < 6 and (n % 2 == 1 or timed_kills >= 5)
        _changes(sim, rng)
        sim.add_operations(sim.project_ids()[0], rng.randint(50, 400), same_second=False)
        proc = _start_sync(sim, data, events_file, receiver.url, secret_file)
        if by_receiver:
            receiver.kill_at = (len(receiver.attempts) + rng.randint(1, 3), proc.pid)
            code = proc.wait(timeout=120)
            assert code == -signal.SIGKILL, f"the receiver's kill never came: exit {code}"
            receiver_kills += 1
        else:
            time.sleep(when.delay())
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                timed_kills += 1
            when.killed(proc.returncode is None)
            proc.wait()
        sim.advance(rng.uniform(0, 60))
    assert timed_kills >= 5 and receiver_kills == 6
    sim.faults = Faults()
    receiver.weights = None
    last = sync_events(sim, data, file=events_file, **_webhook(receiver, secret_file))
    assert last.outcome == "ok" and last.events_pending == 0
    expected = set(versions_after(data, {first.run_id}))
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids)), "an event is in the file twice"
    assert set(ids) == expected
    assert receiver.ids() == expected
    assert len(receiver.attempts) > len(expected), "no retry or redelivery was exercised"
    assert len(receiver.killed_in_flight) == 6
    for event_id in receiver.killed_in_flight:
        assert receiver.attempts.count(event_id) >= 2, f"{event_id} was not delivered again"
    assert all(r.valid for r in receiver.received) and not receiver.bad_requests
    _assert_in_order(receiver)


def test_cli_webhook_needs_a_secret_and_never_shows_it(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    sim = make_sim(seed=15, projects=1, days=1, ops_per_project_per_day=10)
    env = {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }
    base = [sys.executable, "-m", "exporter", "sync", "--max-rps", "0"]
    no_secret = subprocess.run([*base, "--webhook", receiver.url], env=env, capture_output=True)
    assert no_secret.returncode == 2
    assert b"--webhook-secret-file" in no_secret.stderr
    bad = tmp_path / "bad.secret"
    bad.write_text("not base64 !!")
    refused = subprocess.run(
        [*base, "--webhook", receiver.url, "--webhook-secret-file", str(bad)],
        env=env,
        capture_output=True,
    )
    assert refused.returncode == 2 and b"not base64" not in refused.stderr
    down = closed_port_url()
    runs = [
        subprocess.run(
            [
                *base,
                "-vv",
                "--events-backfill",
                "--webhook",
                url,
                "--webhook-secret-file",
                str(secret_file),
                "--webhook-attempts",
                "2",
                "--metrics-file",
                str(tmp_path / "m.prom"),
            ],
            env=env,
            capture_output=True,
        )
        for url in (down, receiver.url)
    ]
    assert [r.returncode for r in runs] == [0, 0]
    assert b"waiting for the next run" in runs[0].stdout
    assert f"{down.partition('/hooks')[0]}/…".encode() in runs[0].stderr  # the host is named
    secret_body = SECRET.split("_", 1)[1].encode()
    for out in [r.stdout + r.stderr for r in runs]:
        assert b"s3cr3t-query" not in out and secret_body not in out
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != secret_file:
            content = path.read_bytes()
            assert b"s3cr3t-query" not in content and secret_body not in content, path
    assert receiver.received and all(r.valid for r in receiver.received)


def test_a_state_from_before_the_outbox_is_read_then_migrated(
    make_sim: Any, tmp_path: Path
) -> None:
    import sqlite3

    from exporter.ops.status import read_status

    sim = make_sim(seed=16, projects=1, days=1, ops_per_project_per_day=10)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    first = sync_events(sim, data)
    con = sqlite3.connect(data / "state.sqlite")
    con.execute("DROP TABLE event_batches")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'format_version'")
    con.commit()
    con.close()
    assert read_status(data).events["pending"] == {"file": 0, "webhook": 0}
    _changes(sim, random.Random(8))
    second = sync_events(sim, data, file=events_file)
    assert second.outcome == "ok"
    ids = [e["id"] for e in file_events(events_file)]
    assert ids and sorted(ids) == sorted(versions_after(data, {first.run_id}))


def test_pending_events_of_the_one_row_per_event_outbox_are_carried_over(
    make_sim: Any, tmp_path: Path
) -> None:
    import sqlite3

    sim = make_sim(seed=17, projects=1, days=1, ops_per_project_per_day=10)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sync_events(sim, data)
    # State format 5: one row per event; one still waiting for the file, one for the webhook.
    con = sqlite3.connect(data / "state.sqlite")
    con.execute("DROP TABLE event_batches")
    con.execute(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, operation_id TEXT "
        "NOT NULL, recorded_us INTEGER NOT NULL, body BLOB NOT NULL, to_file INTEGER NOT NULL, "
        "to_webhook INTEGER NOT NULL)"
    )
    con.execute(
        "INSERT INTO events VALUES (7, 'op-a:2', 'op-a', 1, ?, 1, 0), "
        "(8, 'op-b:1', 'op-b', 2, ?, 0, 1)",
        (b'{"id":"op-a:2"}', b'{"id":"op-b:1"}'),
    )
    con.execute("UPDATE meta SET value = '5' WHERE key = 'format_version'")
    con.commit()
    con.close()
    summary = sync_events(sim, data, file=events_file)
    assert [e["id"] for e in file_events(events_file)] == ["op-a:2"]
    assert summary.events_pending == 1  # op-b:1 waits for a webhook


@pytest.mark.parametrize(
    "text",
    ["plain", 'a "quote"', "back\\slash", "new\nline", "tab\tand \x01", "üñí €", "", None],
)
def test_event_json_escapes_every_string_field(text: str | None) -> None:
    # One tricky value in every string column at once, and alone among plain ones: the JSON
    # built by Arrow parses back to the exact values (a column with nothing to escape skips
    # the escaping; one value that needs it must not be missed).
    import pyarrow as pa

    from exporter.events.render import event_lines

    at = dt.datetime(2025, 1, 16, 21, 2, 4, 214837, tzinfo=dt.timezone.utc)
    strings = ["id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"]
    # The id: not empty, and no newline (the outbox keeps ids newline-separated; API ids are
    # UUIDs).
    op_id = text if text and "\n" not in text else "op"
    rows = [{s: op_id if s == "id" else text for s in strings}, dict.fromkeys(strings, "x")]
    columns: dict[str, Any] = {s: pa.array([r[s] for r in rows], pa.string()) for s in strings}
    columns |= {
        name: pa.array([at, None], pa.timestamp("us", "UTC"))
        for name in ("retry_at", "created_at", "updated_at", "observed_at")
    }
    columns |= {
        "failures_count": pa.array([1, 0], pa.int64()),
        "total_duration_ms": pa.array([None, 31], pa.int64()),
        "version": pa.array([2, 1], pa.int64()),
    }
    table = pa.table(columns)
    ids, lines = event_lines(table, text, [text, "main"], [None, text])
    events = [orjson.loads(line) for line in lines.splitlines()]
    first = rows[0]["id"]
    assert ids.decode().split("\n") == [f"{first}:2", "x:1"]
    assert [e["id"] for e in events] == [f"{first}:2", "x:1"]
    assert events[0]["data"] == {
        **{s: rows[0][s] for s in strings},
        "retry_at": "2025-01-16T21:02:04.214837Z",
        "created_at": "2025-01-16T21:02:04.214837Z",
        "updated_at": "2025-01-16T21:02:04.214837Z",
        "failures_count": 1,
        "total_duration_ms": None,
        "version": 2,
        "project_name": text,
        "branch_name": text,
        "endpoint_name": None,
    }
    assert events[1]["data"]["branch_name"] == "main" and events[1]["data"]["endpoint_name"] == text
    assert events[1]["timestamp"] is None and events[0]["type"] == "operation.changed"


def test_pending_events_of_a_format_8_state_are_delivered_as_recorded(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    # A state written at 6a1c919 (tests/assets/make_events_format8.py): its batches hold the
    # events' JSON. Migrated to format 9 (the `facts` column), they are delivered as recorded.
    import shutil
    import sqlite3

    from exporter.events.delivery import deliver
    from exporter.store.state import FORMAT_VERSION, StateDB

    asset = ROOT / "tests" / "assets" / "events-format-8"
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    data.mkdir()
    shutil.copyfile(asset / "state.sqlite", data / "state.sqlite")
    expected = (asset / "expected.jsonl").read_bytes()
    state = StateDB(data / "state.sqlite")
    try:
        config = EventsConfig(file=events_file, **_webhook(receiver, secret_file, webhook_lanes=1))
        done = deliver(state, config)
    finally:
        state.close()
    lines = expected.splitlines()
    assert len(lines) == 56 and done.delivered == {"file": 56, "webhook": 56}
    assert done.pending == 0 and events_file.read_bytes() == expected
    assert [r.body for r in receiver.received] == lines  # one lane: in order
    con = sqlite3.connect(data / "state.sqlite")
    version = con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
    columns = [row[1] for row in con.execute("PRAGMA table_info(event_batches)")]
    con.close()
    assert version == (str(FORMAT_VERSION),) and FORMAT_VERSION >= 9 and "facts" in columns


def _python_sync_output(sim: Any, data: Path, events_file: Path, patch: str) -> tuple[int, str]:
    """`_python_sync`'s child, its exit code and stderr; a run that never ends fails the test
    (the child is killed at the timeout) instead of hanging the suite. Its syncs take a second
    or two: 30 s is room enough, and what a mutant that hangs the run costs CI."""
    code = f"import os, signal, sys\n{patch}\nfrom exporter.cli import main\n"
    code += "sys.argv = ['opsaudit', 'sync', '--max-rps', '0']\nmain()\n"
    env = child_env(sim, data, events_file)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
    )
    return proc.returncode, proc.stderr


def test_an_error_keeping_a_chunks_events_fails_the_run(make_sim: Any, tmp_path: Path) -> None:
    """The committer takes each chunk's events (`Outbox.keep`) as it writes the chunk's rows
    ahead: an error there (out of memory) must fail the run, not end the committer's thread
    unseen while the walks wait forever for it to take their chunks (the run never ended)."""
    sim = make_sim(seed=21, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    patch = (
        "import exporter.events.outbox as o\n"
        "def keep(self, table): raise MemoryError('no memory left for the events')\n"
        "o.Outbox.keep = keep\n"
    )
    code, stderr = _python_sync_output(sim, data, events_file, patch)
    assert code == 6, stderr
    assert "writing the dataset failed: no memory left for the events" in stderr


def test_a_backlog_that_cannot_be_built_fails_the_run(make_sim: Any, tmp_path: Path) -> None:
    """The committer delivers the events file's backlog before it follows the commits: an
    outbox whose rows were deleted outside opsaudit is the run's StorageError (exit 6) there,
    not a committer thread ended unseen while the walks wait forever for it."""
    sim = make_sim(seed=22, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    # A directory for a file: the events wait in the outbox.
    waited = sync_events(sim, data, file=tmp_path, backfill=True)
    assert waited.versions_written
    for path in (data / "operation_versions").rglob("*.parquet"):
        path.unlink()
    _changes(sim, random.Random(7))
    code, stderr = _python_sync_output(sim, data, events_file, "")
    assert code == 6, stderr
    assert "cannot read the committed rows of waiting events" in stderr


def test_a_full_disk_leaves_no_half_line_in_the_events_file(make_sim: Any, tmp_path: Path) -> None:
    """An append the disk refused part way (ENOSPC after some bytes) left half a line at the
    end of the events file of a run that exited 0: a log shipper tailing it read a torn event
    until a later run cut it. Here the kernel refuses the bytes past a file size
    (RLIMIT_FSIZE: EFBIG after a short write, as a full disk does)."""
    sim = make_sim(seed=24, projects=2, days=1, ops_per_project_per_day=30)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    sync_events(sim, data, file=events_file)  # the backfill: no events
    # Lines of its own first, so that the limit is past every other file the run writes.
    filler = b'{"filler": "' + b"x" * 100 + b'"}\n'
    events_file.write_bytes(filler * 60_000)  # 6.2 MB
    size = events_file.stat().st_size
    _changes(sim, random.Random(11))
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size + 6000}, resource.RLIM_INFINITY))\n"
        "from exporter.cli import main\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0']\n"
        "main()\n"
    )
    env = child_env(sim, data, events_file)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    text = events_file.read_bytes()
    assert text.endswith(b"\n") and len(text) <= size + 6000, text[-200:]
    appended = [e["id"] for e in file_events(events_file)[60_000:]]
    waiting = len(versions_after(data, set(run_ids(data)[:1]))) - len(appended)
    assert waiting > 0, "every event fitted: the test would prove nothing"
    summary = [line for line in done.stdout.splitlines() if line.startswith("sync ok")]
    assert f"; {len(appended)} event(s) delivered, {waiting} waiting" in summary[0], summary
    assert "File too large" in done.stderr, done.stderr
    assert "torn" not in done.stderr  # none was left to cut
    sync_events(sim, data, file=events_file)  # room again: the rest, each once
    ids = [e["id"] for e in file_events(events_file)[60_000:]]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(versions_after(data, set(run_ids(data)[:1])))


def test_an_events_file_that_is_a_pipe_gets_nothing_written_twice(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--events-file /dev/stdout` piped on, or a named pipe: its fsync fails (EINVAL) after
    the append, so the events stayed pending and were written again, by the end-of-run
    delivery (twice in the run that recorded them) and by every later run, the backlog growing
    for good. A pipe is refused before anything is written: the events wait; the CLI refuses
    it up front (exit 2)."""
    sim = make_sim(seed=25, projects=2, days=1, ops_per_project_per_day=20)
    data, pipe = tmp_path / "data", tmp_path / "events.pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # a reader: a writer's open returns
    try:
        assert sync_events(sim, data, file=pipe).outcome == "ok"  # the backfill: no events
        _changes(sim, random.Random(12))
        first = sync_events(sim, data, file=pipe)
        _changes(sim, random.Random(13))
        second = sync_events(sim, data, file=pipe)
        try:
            written = os.read(reader, 1 << 20)
        except BlockingIOError:
            written = b""
    finally:
        os.close(reader)
    assert written == b""
    assert (first.outcome, second.outcome) == ("ok", "ok")
    assert first.events_delivered == 0 and first.events_pending == first.versions_written > 0
    assert second.events_pending == first.versions_written + second.versions_written
    env = child_env(sim, data, pipe)
    refused = subprocess.run(
        [sys.executable, "-m", "exporter", "sync", "--max-rps", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert f"--events-file {pipe} is not a regular file (a pipe" in refused.stderr
    assert "give a file's path" in refused.stderr


def test_an_events_backfill_to_a_pipe_no_one_reads_does_not_hang(
    make_sim: Any, tmp_path: Path
) -> None:
    """A library sync's events backfill to a named pipe that no program reads (its log shipper
    down): the events file's child appender, started ahead of the backfill, blocked in its
    open of the pipe (a writer's open waits for a reader) and the run waited for it 30 s at
    its end, every run, before killing it. The pipe is refused, its events wait, at once."""
    sim = make_sim(seed=29, projects=2, days=1, ops_per_project_per_day=20)
    data, pipe = tmp_path / "data", tmp_path / "events.pipe"
    os.mkfifo(pipe)
    started = time.monotonic()
    summary = sync_events(sim, data, file=pipe, backfill=True)
    took = time.monotonic() - started
    assert summary.outcome == "ok"
    assert summary.events_pending == summary.versions_written > 0
    assert took < 10, f"{took:.1f}s"
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(reader, 1 << 20) == b""  # nothing was written to it
    except BlockingIOError:
        pass
    finally:
        os.close(reader)


def test_events_waiting_for_different_sinks_are_counted_once_each(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """Events of one run wait for the file (its directory missing), those of the next for the
    webhook (down): the summary, `status` and `check` said as many waited as the larger of the
    two ("35 waiting (35 for the file, 19 for the webhook)"), not their sum."""
    from exporter.events.config import read_backlog
    from exporter.store.state import StateDB

    sim = make_sim(seed=26, projects=2, days=1, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "later" / "events.jsonl"
    sync_events(sim, data, file=events_file)  # the backfill: no events
    _changes(sim, random.Random(14))
    first = sync_events(sim, data, file=events_file, **_webhook(receiver, secret_file))
    assert first.events_waiting == {"file": first.versions_written} and first.versions_written
    _changes(sim, random.Random(15))
    down = {**_webhook(receiver, secret_file), "webhook_url": closed_port_url()}
    second = sync_events(sim, data, webhook_attempts=1, **down)
    assert second.outcome == "ok" and second.versions_written > 0
    both = {"file": first.versions_written, "webhook": second.versions_written}
    assert second.events_waiting == both
    assert second.events_pending == first.versions_written + second.versions_written
    state = StateDB(data / "state.sqlite", read_only=True)
    try:
        assert read_backlog(state).total == second.events_pending
    finally:
        state.close()
    # One batch both sinks wait for counts once.
    _changes(sim, random.Random(16))
    third = sync_events(sim, data, file=events_file, webhook_attempts=1, **down)
    assert third.events_pending == second.events_pending + third.versions_written


def test_time_budget_bounds_the_webhooks_delivery(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """`--time-budget` bounds a run: a backlog at a slow receiver held a run of a 0.5 s budget
    for as long as every event took (a cron run of 4 minutes' budget for an hour, the next ones
    finding the lock held). The webhook starts no event past the budget and the 10 s every run
    gets (IN_FLIGHT_GRACE); the rest waits for the next run, in order."""
    from exporter.engine.sync import IN_FLIGHT_GRACE

    sim = make_sim(seed=27, projects=2, days=1, ops_per_project_per_day=10)
    data = tmp_path / "data"
    hook = _webhook(receiver, secret_file, webhook_lanes=1)
    sync_events(sim, data, **hook)  # the backfill: no events
    for pid in sim.project_ids():
        sim.add_operations(pid, 40, same_second=False)
    sim.advance(2)
    receiver.slow_seconds = 0.2  # 80 events and more: 16 s and more on one lane
    started = time.monotonic()
    bounded = sync_events(sim, data, {"time_budget": 0.5}, **hook)
    took = time.monotonic() - started
    n = bounded.versions_written
    assert n >= 80  # (the world's own operations besides)
    assert 0 < bounded.events_delivered < n and bounded.events_pending == n - len(receiver.ids())
    assert took < 0.5 + IN_FLIGHT_GRACE + 4, took
    receiver.slow_seconds = 0
    rest = sync_events(sim, data, **hook)
    assert rest.events_pending == 0
    assert sorted(receiver.ids()) == sorted(versions_after(data, set(run_ids(data)[:1])))


def test_a_retrys_wait_ends_with_the_time_budget(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """A receiver answering 500: the retries' waits (here 2, 4, 8 s) ran past the budget's
    end and its 10 s (IN_FLIGHT_GRACE), the run slept 8 s more to find its time up. The wait
    ends with the time the run has; the event waits for the next run, unsent, no error."""
    from exporter.engine.sync import IN_FLIGHT_GRACE

    sim = make_sim(seed=29, projects=1, days=1, ops_per_project_per_day=10)
    data = tmp_path / "data"
    sync_events(sim, data, **_webhook(receiver, secret_file))  # the backfill: no events
    _changes(sim, random.Random(18))
    receiver.mode = "fail"
    started = time.monotonic()
    hook = _webhook(receiver, secret_file, webhook_lanes=1, webhook_backoff=2.0)
    bounded = sync_events(sim, data, {"time_budget": 0.5}, **hook)
    took = time.monotonic() - started
    assert bounded.events_delivered == 0 and bounded.events_pending == bounded.versions_written > 0
    # Attempts at 0, 2 and 6 s, the wait for the fourth cut at the budget's end + 10 s (not 14).
    assert len(receiver.attempts) == 3 and took < 0.5 + IN_FLIGHT_GRACE + 2, took


def test_a_redirecting_webhook_is_named_as_such_without_its_target(
    make_sim: Any,
    tmp_path: Path,
    receiver: Receiver,
    secret_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A redirect is not followed (retried as any non-2xx answer, PRODUCT.md): the warning
    said only "HTTP 301 after 6 attempt(s)" for an http:// URL whose server sends every request
    on to https://, run after run; it says what to change, and never the Location (a token may
    be in it)."""
    sim = make_sim(seed=28, projects=1, days=1, ops_per_project_per_day=10)
    data = tmp_path / "data"
    sync_events(sim, data, **_webhook(receiver, secret_file))  # the backfill: no events
    _changes(sim, random.Random(17))
    receiver.mode = "redirect"
    with caplog.at_level("DEBUG", logger="opsaudit.events"):
        summary = sync_events(sim, data, **_webhook(receiver, secret_file, webhook_attempts=2))
    assert summary.outcome == "ok" and summary.events_pending == summary.versions_written > 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"webhook {receiver.url.partition('/hooks')[0]}/…: HTTP 301, a redirect (not followed: "
        "give --webhook its target) after 2 attempt(s); the events wait in the outbox for the "
        "next run"
    ]
    assert "moved-s3cr3t" not in caplog.text and "elsewhere" not in caplog.text


def _sync_stderr(sim: Any, data: Path, events_file: Path, code: str) -> tuple[int, list[str]]:
    """A sync in a child process of its own (the appender's stderr is that process's fd 2):
    its exit code and its stderr's lines."""
    env = child_env(sim, data, events_file)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    return proc.returncode, proc.stderr.splitlines()


def test_an_events_file_that_cannot_be_opened_is_one_line_and_its_events_wait(
    make_sim: Any, tmp_path: Path
) -> None:
    """An events backfill to a path that cannot be opened (its directory missing; a directory,
    made after the options were read) ended ok with the events waiting, as PRODUCT.md allows,
    but the appender's child printed a Python traceback on stderr. Now the run's stderr is one
    line: what failed, the path and the fix; a later run, the path fixed, delivers them all."""
    sim = make_sim(seed=25, projects=2, days=1, ops_per_project_per_day=30)

    def fix(path: Path, problem: str) -> str:
        return (
            f"events file {path}: {problem}; the events wait in the outbox for the next run "
            "that can append to it (a file, in a directory that exists, this user may write)"
        )

    # The command line, to a file in a directory that does not exist.
    data, events_file = tmp_path / "data", tmp_path / "later" / "events.jsonl"
    code = "from exporter.cli import main\nimport sys\n"
    code += "sys.argv = ['opsaudit', 'sync', '--max-rps', '0', '--events-backfill']\nmain()\n"
    exit_code, lines = _sync_stderr(sim, data, events_file, code)
    assert (exit_code, [line.split(" opsaudit.events: ")[-1] for line in lines]) == (
        0,
        [fix(events_file, "No such file or directory")],
    ), lines
    events_file.parent.mkdir()
    assert sync_events(sim, data, file=events_file).events_pending == 0
    assert sorted(e["id"] for e in file_events(events_file)) == sorted(versions_after(data, set()))

    # The library, to a directory (the command line refuses one it sees).
    data, folder = tmp_path / "data2", tmp_path / "folder"
    folder.mkdir()
    code = (
        "from pathlib import Path\nimport os\n"
        "from exporter.engine.sync import SyncConfig, sync\n"
        "from exporter.events.config import EventsConfig\n"
        "sync(SyncConfig(data_dir=Path(os.environ['OPSAUDIT_DATA_DIR']), max_rps=None,\n"
        "    api_key=os.environ['NEON_API_KEY'], base_url=os.environ['OPSAUDIT_BASE_URL'],\n"
        "    events=EventsConfig(file=Path(os.environ['OPSAUDIT_EVENTS_FILE']), backfill=True)))\n"
    )
    assert _sync_stderr(sim, data, folder, code) == (0, [fix(folder, "Is a directory")])
    folder.rmdir()
    assert sync_events(sim, data, file=folder).events_pending == 0
    assert sorted(e["id"] for e in file_events(folder)) == sorted(versions_after(data, set()))


def test_cli_summary_says_each_sinks_count_with_both_sinks(
    make_sim: Any, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    """With the file and the webhook, the summary said the larger sink's count ("21 event(s)
    delivered (21 to the file, 0 to the webhook)" of a run whose webhook was down): each sink's
    count now, where it went, the webhook by its host alone (its path and query are never
    shown)."""
    sim = make_sim(seed=19, projects=2, days=1, ops_per_project_per_day=6)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    env = child_env(sim, data, events_file)
    base = [sys.executable, "-m", "exporter", "sync", "--max-rps", "0", "--events-backfill"]
    hook = ["--webhook-secret-file", str(secret_file), "--webhook-attempts", "1"]
    down = closed_port_url()
    first = subprocess.run(
        [*base, *hook, "--webhook", down], env=env, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    n = len(versions_after(data, set()))
    assert n > 0 and len(file_events(events_file)) == n
    down_host = down.split("/")[2]  # 127.0.0.1:PORT
    assert first.stdout.splitlines()[-1].endswith(
        f"; {n} event(s) appended to {events_file}, 0 delivered to the webhook at {down_host}, "
        f"{n} waiting for the next run ({n} for the webhook)"
    ), first.stdout
    second = subprocess.run(
        [*base, *hook, "--webhook", receiver.url], env=env, capture_output=True, text=True
    )
    assert second.returncode == 0, second.stderr
    up_host = receiver.url.split("/")[2]
    assert second.stdout.splitlines()[-1].endswith(
        f"; 0 event(s) appended to {events_file}, {n} delivered to the webhook at {up_host}"
    ), second.stdout
    assert len(receiver.ids()) == n
    for out in (first.stdout, second.stdout):
        assert "/hooks" not in out and "s3cr3t-query" not in out
