"""Write `tests/assets/events-format-8/`: the state of a data directory as opsaudit wrote it
before the outbox could hold facts instead of the events' JSON (state format 8, commit
6a1c919), with events waiting for the file and the webhook, and `expected.jsonl`, the JSON Lines
that state's outbox holds (in commit order), for tests/events/test_events.py.

Run with that commit's code on the path, from the root of a checkout of it:

    git archive 6a1c919 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/assets/make_events_format8.py tests/assets/events-format-8

A backfill with --events-backfill whose sinks take nothing (the file in a missing directory, a
webhook on a closed port, one attempt), in small commits; only state.sqlite is kept.
"""

from __future__ import annotations

import base64
import shutil
import socket
import sqlite3
import sys
import tempfile
from pathlib import Path

from exporter.api.client import RetryPolicy
from exporter.engine.sync import SyncConfig, sync
from exporter.engine.walk import WalkLimits
from exporter.events.outbox import EventsConfig
from exporter.simulator import SimConfig, Simulator


def main(out: Path) -> int:
    config = SimConfig(seed=22, projects=2, days=1, ops_per_project_per_day=15)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Simulator(config) as sim, tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        summary = sync(
            SyncConfig(
                data_dir=data,
                api_key=sim.personal_key,
                base_url=sim.base_url,
                max_rps=None,
                retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
                commit_rows=10,
                commit_seconds=0.2,
                limits=WalkLimits(page_size=10, flush_rows=10),
                events=EventsConfig(
                    file=Path(tmp) / "missing" / "events.jsonl",
                    webhook_url=f"http://127.0.0.1:{port}/",
                    webhook_key=base64.b64decode(base64.b64encode(b"k" * 32)),
                    backfill=True,
                    webhook_attempts=1,
                ),
            )
        )
        assert summary.outcome == "ok" and summary.events_pending, summary
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data / "state.sqlite", out / "state.sqlite")
    con = sqlite3.connect(out / "state.sqlite")
    lines = b"".join(r[0] for r in con.execute("SELECT lines FROM event_batches ORDER BY seq"))
    con.close()
    (out / "expected.jsonl").write_bytes(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
