"""Measure commits to a loopback moto S3 server and to local disk (figures for docs/lake-design.md).

    python tests/lake/measure.py [TOTAL_ROWS] [ROWS_PER_COMMIT] [STATE_BYTES]

Commits TOTAL_ROWS operation_versions rows (spread over 24 months) in batches of
ROWS_PER_COMMIT, each with a state file of STATE_BYTES; prints wall time and object-store
requests by kind, then the same on local disk, then a fresh-machine restore.

`moto_s3` is shared with measure_sync.py (which imports this file).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lakedata  # beside this script
import pyarrow as pa

from exporter.store.lake import LakeDataset, parse_location


@dataclass
class MotoS3:
    endpoint: str

    def log(self) -> list[list[str]]:
        with urllib.request.urlopen(self.endpoint + "/_ctl/log") as resp:
            return list(json.load(resp))

    def reset(self) -> None:
        urllib.request.urlopen(
            urllib.request.Request(self.endpoint + "/_ctl/reset", method="POST")
        ).close()


@contextlib.contextmanager
def moto_s3() -> Iterator[MotoS3]:
    """moto_server.py in a subprocess, AWS_* credentials in this process and a bucket "measure"."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("moto_server.py"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        endpoint = f"http://127.0.0.1:{int(proc.stdout.readline())}"
        os.environ.update(
            AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1"
        )
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="measure"
        )
        yield MotoS3(endpoint)
    finally:
        proc.terminate()
        proc.wait()


def run(url: str, options: dict[str, str], total: int, per: int, state: Path) -> tuple[float, int]:
    ds = LakeDataset.open(parse_location(url, options), create=True)
    lease = ds.lease()
    lease.acquire()
    n = ds.restore_state(state, lease=lease) or 0
    started = time.perf_counter()
    batch = 0
    for start in range(0, total, per):
        rows = min(per, total - start)
        parts = [lakedata.versions(m, max(1, rows // 24)) for m in range(24)]
        table = pa.concat_tables(parts).slice(0, rows)
        n += 1
        ds.commit(table, state, n, lease=lease)
        batch += 1
    elapsed = time.perf_counter() - started
    lease.release()
    return elapsed, batch


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    state_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    with moto_s3() as s3, tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state.sqlite"
        state.write_bytes(os.urandom(state_bytes))
        options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true"}
        s3.reset()
        elapsed, commits = run("s3://measure/trail", options, total, per, state)
        counts = lakedata.count_requests(s3.log())
        requests = sum(counts.values())
        print(
            f"S3 (moto, loopback): {total} rows in {commits} commits of {per}, state "
            f"{state_bytes} B: {elapsed:.2f} s, {requests} requests "
            f"({requests / commits:.1f} per commit)"
        )
        print("  by kind:", dict(sorted(counts.items())))
        elapsed, commits = run(f"file://{tmp}/local", {}, total, per, state)
        print(f"local disk: {total} rows in {commits} commits: {elapsed:.2f} s")
        s3.reset()
        started = time.perf_counter()
        fresh = LakeDataset.open(parse_location("s3://measure/trail", options))
        fresh.restore_state(Path(tmp) / "restored.sqlite")
        rows = fresh.snapshot("operation_versions").count_rows()  # type: ignore[union-attr]
        counts = lakedata.count_requests(s3.log())
        print(
            f"fresh machine: open + restore + count ({rows} rows): "
            f"{time.perf_counter() - started:.2f} s, {sum(counts.values())} requests "
            f"{dict(sorted(counts.items()))}"
        )


if __name__ == "__main__":
    main()
