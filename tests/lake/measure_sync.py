"""Measure `opsaudit sync` into a loopback moto S3 server and into a local directory (issue 11's
closing figures): a backfill's wall time and object-store requests, then a no-change sync's.

    python tests/lake/measure_sync.py [PROJECTS] [OPS_PER_PROJECT]

The simulator (rate limits off, unpaced) serves PROJECTS projects with OPS_PER_PROJECT operations
each (default 20 x 10,000 = 200,000); the sync runs in this process, as `opsaudit sync` would.
The S3 server and the request counts are measure.py's.
"""

from __future__ import annotations

import sys
import tempfile
import time

import lakedata  # beside this script
from measure import moto_s3

from exporter.engine.sync import SyncConfig, sync
from exporter.simulator import SimConfig, Simulator


def main() -> None:
    projects = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    per_project = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    days = 30
    with moto_s3() as server:
        sim = Simulator(
            SimConfig(
                seed=7,
                projects=projects,
                days=days,
                ops_per_project_per_day=per_project // days,
                shared_projects=0,
            )
        ).start()
        options = [f"AWS_ENDPOINT_URL={server.endpoint}", "AWS_ALLOW_HTTP=true"]

        def run(data_dir: str, opts: list[str]) -> tuple[float, int]:
            config = SyncConfig(
                data_dir=data_dir,
                storage_options=opts,
                api_key=sim.personal_key,
                base_url=sim.base_url,
                max_rps=None,
            )
            started = time.perf_counter()
            summary = sync(config)
            assert summary.outcome == "ok", summary.error
            return time.perf_counter() - started, summary.versions_written

        def report(label: str, elapsed: float, rows: int, s3: bool) -> None:
            line = f"{label}: {elapsed:.2f} s, {rows} versions written"
            if s3:
                entries = server.log()
                counts = lakedata.count_requests(
                    entries, control="lease/marker", other="list/other"
                )
                line += f", {len(entries)} object-store requests {dict(sorted(counts.items()))}"
            print(line, flush=True)

        try:
            with tempfile.TemporaryDirectory() as tmp:
                for label, target, opts, s3 in (
                    ("S3 (moto)", "s3://measure/trail", options, True),
                    ("local disk", f"{tmp}/local", [], False),
                ):
                    server.reset()
                    elapsed, rows = run(target, opts)
                    report(f"{label} backfill", elapsed, rows, s3)
                    server.reset()
                    elapsed, rows = run(target, opts)
                    report(f"{label} no-change incremental", elapsed, rows, s3)
        finally:
            sim.stop()


if __name__ == "__main__":
    main()
