"""Measure `opsaudit sync` into a loopback moto S3 server and into a local directory (issue 11's
closing figures): a backfill's wall time and object-store requests, then a no-change sync's.

    python tests/lake/measure_sync.py [PROJECTS] [OPS_PER_PROJECT]

The simulator (rate limits off, unpaced) serves PROJECTS projects with OPS_PER_PROJECT operations
each (default 20 x 10,000 = 200,000); the sync runs in this process, as `opsaudit sync` would.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from exporter._sync import SyncConfig, sync
from exporter.simulator import SimConfig, Simulator


def _kind(method: str, path: str) -> str:
    if "/_delta_log/" in path:
        kind = "checkpoint" if "checkpoint" in path else "log"
    elif "/_opsaudit/state/" in path:
        kind = "state"
    elif "/_opsaudit/" in path:
        kind = "lease/marker"
    elif path.endswith(".parquet"):
        kind = "data"
    else:
        kind = "list/other"
    return f"{method} {kind}"


def main() -> None:
    projects = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    per_project = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    days = 30
    here = Path(__file__).parent
    proc = subprocess.Popen(
        [sys.executable, str(here / "moto_server.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    endpoint = f"http://127.0.0.1:{int(proc.stdout.readline())}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1"
    )
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="measure"
    )

    def log() -> list[list[str]]:
        with urllib.request.urlopen(endpoint + "/_ctl/log") as resp:
            return list(json.load(resp))

    def reset() -> None:
        urllib.request.urlopen(
            urllib.request.Request(endpoint + "/_ctl/reset", method="POST")
        ).close()

    sim = Simulator(
        SimConfig(
            seed=7,
            projects=projects,
            days=days,
            ops_per_project_per_day=per_project // days,
            shared_projects=0,
        )
    ).start()
    options = [f"AWS_ENDPOINT_URL={endpoint}", "AWS_ALLOW_HTTP=true"]

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
            entries = log()
            counts = collections.Counter(_kind(e[0], e[1]) for e in entries)
            line += f", {len(entries)} object-store requests {dict(sorted(counts.items()))}"
        print(line, flush=True)

    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, target, opts, s3 in (
                ("S3 (moto)", "s3://measure/trail", options, True),
                ("local disk", f"{tmp}/local", [], False),
            ):
                reset()
                elapsed, rows = run(target, opts)
                report(f"{label} backfill", elapsed, rows, s3)
                reset()
                elapsed, rows = run(target, opts)
                report(f"{label} no-change incremental", elapsed, rows, s3)
    finally:
        sim.stop()
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
