"""Write `tests/assets/pre-superseded/`: a data directory as opsaudit wrote it before the
superseded record (issue 24; state format 6, commit 6b60eef), for tests/sync/test_superseded.py.

Run with that commit's code on the path, from the root of a checkout of it:

    git archive 6b60eef | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/assets/make_pre_superseded.py tests/assets/pre-superseded

A backfill, then three runs 15 minutes apart so that operations still open get later versions,
small commits so that compaction runs; the views database and the lock are left out.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from exporter.api.client import RetryPolicy
from exporter.engine.sync import SyncConfig, sync
from exporter.engine.walk import WalkLimits
from exporter.simulator import SimConfig, Simulator


def main(out: Path) -> int:
    config = SimConfig(
        seed=24,
        projects=2,
        shared_projects=0,
        orgs=1,
        days=6,
        ops_per_project_per_day=40,
        start="2025-02-02T12:00:00Z",
        live_ops_per_project_per_hour=30,
    )
    with Simulator(config) as sim:
        for advance in (0, 900, 900, 900):
            sim.advance(advance)
            summary = sync(
                SyncConfig(
                    data_dir=out,
                    api_key=sim.personal_key,
                    base_url=sim.base_url,
                    max_rps=None,
                    retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
                    commit_rows=20,
                    commit_seconds=0.2,
                    limits=WalkLimits(page_size=20, flush_rows=20),
                )
            )
            assert summary.outcome == "ok", summary
    for name in ("opsaudit.duckdb", ".lock"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "_staging", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
