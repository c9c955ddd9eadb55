"""Write `tests/assets/format-2/`: a data directory as opsaudit wrote it in state format 2
(commit b930082, 2026-11-23), for tests/sync/test_storage.py's upgrade test.

Run with that commit's code on the path (it needs `tenacity`), from outside any checkout:

    git archive b930082 | tar -x -C /tmp/b930082
    pip install --target /tmp/b930082-extra tenacity
    PYTHONPATH=/tmp/b930082:/tmp/b930082-extra python tests/assets/make_format2.py tests/assets/format-2

A backfill, then a second run 15 minutes later with operations still open; the views database
and the lock are left out.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from exporter._client import RetryPolicy
from exporter._sync import SyncConfig, sync
from exporter._walk import WalkLimits

from exporter.simulator import SimConfig, Simulator


def main(out: Path) -> int:
    config = SimConfig(
        seed=2,
        projects=2,
        shared_projects=0,
        orgs=1,
        days=3,
        ops_per_project_per_day=30,
        start="2025-02-02T12:00:00Z",
        live_ops_per_project_per_hour=30,
    )
    with Simulator(config) as sim:
        for advance in (0, 900):
            sim.advance(advance)
            summary = sync(
                SyncConfig(
                    data_dir=out,
                    api_key=sim.personal_key,
                    base_url=sim.base_url,
                    max_rps=None,
                    retry=RetryPolicy(backoff_initial=0.01, backoff_max=0.05),
                    limits=WalkLimits(page_size=50, flush_rows=50),
                )
            )
            assert summary.outcome == "ok", summary
    for name in ("opsaudit.duckdb", ".lock", "state.sqlite-wal", "state.sqlite-shm"):
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
