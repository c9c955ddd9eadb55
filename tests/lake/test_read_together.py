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


def test_a_dataset_given_twice_is_refused_however_its_prefix_is_spelled(
    make_sim: Any, bucket: Bucket
) -> None:
    """deltalake and obstore decode a prefix's %-escapes: `s3://b/pct%20x` writes under the
    key `pct x`, yet given with `s3://b/pct x` it was read twice, past the duplicate check."""
    sim = make_sim(seed=3, projects=1, days=1, ops_per_project_per_day=5)
    options = bucket.storage_options()
    assert run_sync(sim, bucket.url("pct%20x"), options).outcome == "ok"
    assert "pct x/_opsaudit/dataset.json" in bucket.list_keys()
    args = [a for o in options for a in ("--storage-option", o)]
    for first, second in [("pct%20x", "pct x"), ("pct x", "pct%20x"), ("pct%20x", "pct%20%78")]:
        dirs = ["--data-dir", bucket.url(first), "--data-dir", bucket.url(second)]
        for command in (["query", *dirs, *args, "SELECT 1"], ["report", *dirs, *args]):
            result = CliRunner().invoke(cli, command)
            assert result.exit_code == 2, result.output
            assert result.output == f"Error: --data-dir {bucket.url(second)} is given twice\n"
    s3a = ["--data-dir", bucket.url("pct x"), "--data-dir", "s3a" + bucket.url("pct x")[2:]]
    result = CliRunner().invoke(cli, ["query", *s3a, *args, "SELECT 1"])
    assert result.output == f"Error: --data-dir s3a{bucket.url('pct x')[2:]} is given twice\n"
