"""Several datasets read together (issue 11): `opsaudit query --data-dir A --data-dir B` and
`exporter.connect([A, B])`.

One export per organization, and one per account that overlaps them (a personal key sees every
org and the shared projects): read together, `operations` must equal what the API returns for
all of them, each operation once, in its newest observed state; per-dataset columns say where a
row came from; the report over the union equals the report over one dataset holding the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import exporter
from exporter.cli import cli

from .conftest import run_sync


def query(data_dirs: list[Path | str], sql: str, *extra: str) -> list[dict[str, Any]]:
    args = ["query", "--format", "json", *extra]
    for d in data_dirs:
        args += ["--data-dir", str(d)]
    result = CliRunner().invoke(cli, [*args, sql])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def latest_by_id(data_dirs: list[Path | str]) -> dict[str, dict[str, Any]]:
    rows = query(data_dirs, "SELECT id, raw, dataset FROM operations")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "an operation appears twice in operations"
    return {r["id"]: orjson.loads(r["raw"]) for r in rows}


@pytest.fixture
def accounts(make_sim: Any, tmp_path: Path) -> tuple[Any, dict[str, Path]]:
    """Two orgs, shared projects; a dataset per org and one of the personal key (all of them)."""
    sim = make_sim(
        seed=41,
        projects=4,
        orgs=2,
        shared_projects=1,
        days=3,
        ops_per_project_per_day=40,
        live_ops_per_project_per_hour=0,
    )
    org_a, org_b = sim.org_ids
    dirs = {"a": tmp_path / "org-a", "b": tmp_path / "org-b", "all": tmp_path / "account"}
    for name, key in (
        ("a", sim.org_key(org_a)),
        ("b", sim.org_key(org_b)),
        ("all", sim.personal_key),
    ):
        assert run_sync(sim, dirs[name], key=key).outcome == "ok"
    return sim, dirs


def test_disjoint_datasets_read_together_equal_the_api(accounts: Any) -> None:
    sim, dirs = accounts
    org_a, org_b = sim.org_ids
    truth = sim.ground_truth(sim.project_ids(org_a) + sim.project_ids(org_b))
    assert latest_by_id([dirs["a"], dirs["b"]]) == truth
    # Each row names its dataset, as given on the command line.
    per_dataset = query(
        [dirs["a"], dirs["b"]],
        "SELECT dataset, count(*) AS n FROM operations GROUP BY dataset ORDER BY dataset",
    )
    expected = [
        {"dataset": str(dirs["a"]), "n": len(sim.ground_truth(sim.project_ids(org_a)))},
        {"dataset": str(dirs["b"]), "n": len(sim.ground_truth(sim.project_ids(org_b)))},
    ]
    assert per_dataset == sorted(expected, key=lambda r: r["dataset"])
    # Each dataset's own views stay reachable in its schema, in the order given.
    [own] = query([dirs["a"], dirs["b"]], "SELECT count(*) AS n FROM d2.operations")
    assert own["n"] == expected[1]["n"]


def test_overlapping_datasets_hold_each_operation_once_in_its_newest_state(
    accounts: Any,
) -> None:
    sim, dirs = accounts
    org_a, _ = sim.org_ids
    # An operation of org A finishes after both exports saw it running; only the account's
    # export reads it again. Read together, the newest state wins whichever order is given.
    sim.advance(60)
    [op_id] = sim.add_operations(sim.project_ids(org_a)[0], 1, status="running")
    assert run_sync(sim, dirs["a"], key=sim.org_key(org_a)).outcome == "ok"
    assert run_sync(sim, dirs["all"]).outcome == "ok"
    sim.advance(60)
    sim.update_operation(op_id, status="finished")
    assert run_sync(sim, dirs["all"]).outcome == "ok"

    truth = sim.ground_truth()
    for order in ([dirs["a"], dirs["b"], dirs["all"]], [dirs["all"], dirs["b"], dirs["a"]]):
        assert latest_by_id(order) == truth
        # operation_versions keeps, per operation, the history of the dataset that owns it:
        # numbered 1..n without a gap, so the views over versions stay exact.
        gaps = query(
            order,
            "SELECT id FROM operation_versions GROUP BY id "
            "HAVING count(*) <> max(version) OR count(DISTINCT dataset) <> 1",
        )
        assert gaps == []
    [owner] = query(
        [dirs["a"], dirs["all"]],
        f"SELECT dataset, status, version FROM operations WHERE id = '{op_id}'",
    )
    assert owner == {"dataset": str(dirs["all"]), "status": "finished", "version": 2}
    # Projects once each (the shared one and every org's), with their dataset.
    projects = query(
        [dirs["a"], dirs["b"], dirs["all"]], "SELECT id FROM projects WHERE deleted_at IS NULL"
    )
    assert sorted(p["id"] for p in projects) == sorted(sim.project_ids())
    # Names likewise: one row per branch / compute id, and one history (that dataset's) each,
    # whatever the order: a shared project's branches are listed by several datasets.
    for order in ([dirs["a"], dirs["b"], dirs["all"]], [dirs["all"], dirs["b"], dirs["a"]]):
        for table, key in (
            ("branches", "id"),
            ("endpoints", "id"),
            ("branch_versions", "id, version"),
            ("endpoint_versions", "id, version"),
            ("project_versions", "id, version"),
        ):
            twice = query(order, f"SELECT {key} FROM {table} GROUP BY ALL HAVING count(*) > 1")
            assert twice == [], table
        together = query(order, "SELECT id, name, deleted_at FROM branches ORDER BY id")
        assert together == query(
            [dirs["all"]], "SELECT id, name, deleted_at FROM branches ORDER BY id"
        )
    runs = query(
        [dirs["a"], dirs["all"]], "SELECT dataset, count(*) AS n FROM sync_runs GROUP BY 1"
    )
    assert {r["dataset"]: r["n"] for r in runs} == {str(dirs["a"]): 2, str(dirs["all"]): 3}


def test_the_report_over_datasets_equals_the_report_over_one_holding_the_same(
    accounts: Any,
) -> None:
    _, dirs = accounts

    def report(*data_dirs: Path) -> dict[str, Any]:
        args = ["report", "--format", "json", "--until", "2100-01-01"]
        for d in data_dirs:
            args += ["--data-dir", str(d)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        out["headline"].pop("as_of")  # the moment each report ran
        out["freshness"].pop("lag")  # measured from that moment
        for section in ("failing_operations", "stuck_operations"):
            for row in out[section]:
                row.pop("age")  # measured from that moment too: whole seconds may tick between
        return dict(out)

    together = report(dirs["a"], dirs["b"], dirs["all"])
    assert together["headline"]["operations"] > 0
    alone = report(dirs["all"])
    fresh = together.pop("freshness")
    alone.pop("freshness")
    assert together == alone
    # How fresh: the least fresh dataset's, named (the freshest one's hid a dataset whose sync
    # stopped), as its own report says it.
    own = {str(d): report(d)["freshness"] for d in (dirs["a"], dirs["b"], dirs["all"])}
    stalest = min(own, key=lambda d: own[d]["last_success_at"])
    assert fresh == {**own[stalest], "dataset": stalest}


def test_connect_takes_a_list_and_refuses_a_dataset_given_twice(accounts: Any) -> None:
    sim, dirs = accounts
    con = exporter.connect([dirs["a"], str(dirs["b"])])
    try:
        (n,) = con.execute("SELECT count(*) FROM operations").fetchone()
    finally:
        con.close()
    org_a, org_b = sim.org_ids
    assert n == len(sim.ground_truth(sim.project_ids(org_a) + sim.project_ids(org_b)))
    with pytest.raises(exporter.ConfigError, match="given twice"):
        exporter.connect([dirs["a"], dirs["a"] / ".." / dirs["a"].name])
    result = CliRunner().invoke(
        cli, ["query", "--data-dir", str(dirs["a"]), "--data-dir", "nowhere", "select 1"]
    )
    assert result.exit_code == 2
    assert "--data-dir nowhere does not exist" in result.output


def test_the_report_over_datasets_says_how_fresh_the_least_fresh_one_is(
    accounts: Any, tmp_path: Path
) -> None:
    """A dataset whose syncs never succeeded (a revoked key), read with one synced now: the
    headline names it and says "no successful sync yet", not the other's freshness."""
    sim, dirs = accounts
    never = tmp_path / "never"
    assert run_sync(sim, never, key="not-a-key").outcome == "auth_failed"
    result = CliRunner().invoke(
        cli, ["report", "--data-dir", str(dirs["all"]), "--data-dir", str(never)]
    )
    assert result.exit_code == 0, result.output
    [data] = [line for line in result.stdout.splitlines() if line.startswith("Data ")]
    assert f"least fresh dataset {never}: no successful sync yet; last run " in data
    assert data.endswith(": auth_failed (0 of 0 projects)")
