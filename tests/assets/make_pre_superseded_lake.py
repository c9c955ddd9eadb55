"""Write `tests/assets/pre-superseded-lake/`: an object-storage dataset as opsaudit wrote it before
the superseded record on the lake (issue 24; commit d8761e2), for
tests/lake/test_superseded_lake.py: every object under the dataset prefix, by its key.

Run with that commit's code on the path, from the root of a checkout of this one:

    git archive d8761e2 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/assets/make_pre_superseded_lake.py tests/assets/pre-superseded-lake

A moto S3 server on loopback (tests/lake/moto_server.py), a backfill, then three runs 15 minutes
apart so that operations still open get later versions; small commits; the state objects
but the last one left out. Prints the numbers of
versions and operations the test expects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import duckdb

from exporter.api.client import RetryPolicy
from exporter.engine.sync import SyncConfig, sync
from exporter.engine.walk import WalkLimits
from exporter.simulator import SimConfig, Simulator

SERVER = Path(__file__).parents[1] / "lake" / "moto_server.py"
BUCKET, PREFIX = "old", "trail"


def main(out: Path) -> int:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing-secret-value",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    server = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        endpoint = f"http://127.0.0.1:{int(server.stdout.readline())}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        opts = [f"AWS_ENDPOINT_URL={endpoint}", "AWS_ALLOW_HTTP=true"]
        config = SimConfig(
            seed=24,
            projects=2,
            shared_projects=0,
            orgs=1,
            days=4,
            ops_per_project_per_day=30,
            start="2025-02-02T12:00:00Z",
            live_ops_per_project_per_hour=30,
        )
        with Simulator(config) as sim:
            for advance in (0, 900, 900, 900):
                sim.advance(advance)
                summary = sync(
                    SyncConfig(
                        data_dir=f"s3://{BUCKET}/{PREFIX}",
                        storage_options=opts,
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
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX + "/")
        for page in pages:
            for item in page.get("Contents", []):
                target = out / item["Key"].removeprefix(PREFIX + "/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    finally:
        server.terminate()
        server.wait()
    # Only the committed batch's state is read; the older ones kept for debugging are left out.
    states = sorted((out / "_opsaudit" / "state").glob("*.sqlite"))
    for older in states[:-1]:
        older.unlink()
    from exporter.store.lake import open_dataset

    snap = open_dataset(f"file://{out.resolve()}").snapshot("operation_versions")
    con = duckdb.connect()
    con.register("v", snap)
    print(con.execute("SELECT count(*), count(DISTINCT id) FROM v").fetchone())
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
