"""Object-storage datasets read by notebooks and together with others (issue 11):
`exporter.connect("s3://...")` and `opsaudit query --data-dir s3://A --data-dir B`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

import exporter
from exporter.cli import cli

from .conftest import Bucket, run_sync


def test_connect_reads_an_s3_dataset_and_query_reads_it_with_a_local_one(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    sim = make_sim(
        seed=23, projects=4, orgs=2, shared_projects=0, days=2, ops_per_project_per_day=50
    )
    org_a, org_b = sim.org_ids
    url, local, options = bucket.url("org-a"), tmp_path / "org-b", bucket.storage_options()
    assert run_sync(sim, url, options, key=sim.org_key(org_a)).outcome == "ok"
    assert run_sync(sim, local, [], key=sim.org_key(org_b)).outcome == "ok"

    # A notebook: the S3 dataset alone, by URL.
    con = exporter.connect(url, storage_options=options)
    try:
        rows = con.execute("SELECT id, raw FROM operations").fetchall()
    finally:
        con.close()
    assert {i: orjson.loads(r) for i, r in rows} == sim.ground_truth(sim.project_ids(org_a))

    # Both, through the CLI: every operation of both orgs once, each with its dataset.
    args = ["query", "--format", "json", "--data-dir", url, "--data-dir", str(local)]
    for option in options:
        args += ["--storage-option", option]
    result = CliRunner().invoke(cli, [*args, "SELECT id, raw, dataset FROM operations"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == len({r["id"] for r in rows})
    assert {r["id"]: orjson.loads(r["raw"]) for r in rows} == sim.ground_truth()
    origin = {
        r["dataset"]
        for r in rows
        if r["raw"] and orjson.loads(r["raw"])["project_id"] in sim.project_ids(org_a)
    }
    assert origin == {url}
