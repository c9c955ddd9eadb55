"""Names on object storage (issue 21): the names tables are Delta tables like the others, read
by the same views; a run whose listings change nothing rewrites none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import exporter

from .conftest import Bucket, run_sync

_NAMES_SQL = (
    'SELECT id, project_id, name, parent_id, "default", protected, created_by, '
    "deleted_at IS NULL FROM branches ORDER BY id",
    "SELECT id, branch_id, name, type, suspend_timeout_seconds FROM endpoints ORDER BY id",
    "SELECT id, version, name FROM branch_versions ORDER BY id, version",
    "SELECT id, version, name, pg_version FROM project_versions ORDER BY id, version",
    "SELECT id, branch_name, endpoint_name FROM operations ORDER BY id",
)


def _answers(data_dir: str | Path, opts: list[str]) -> list[list[tuple[Any, ...]]]:
    con = exporter.connect(data_dir, storage_options=opts)
    try:
        return [con.execute(sql).fetchall() for sql in _NAMES_SQL]
    finally:
        con.close()


def test_names_tables_on_s3_equal_a_local_run(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    from exporter.store.lake import open_dataset

    sim = make_sim(seed=51, projects=2, shared_projects=0, days=2, ops_per_project_per_day=200)
    url, opts = bucket.url("names"), bucket.storage_options()
    pid = sim.project_ids()[0]
    branch_id, _endpoint, _ops = sim.add_branch(pid, "preview/pr-7")
    for target, options in ((url, opts), (str(tmp_path), [])):
        assert run_sync(sim, target, options).outcome == "ok"
    s3, local = _answers(url, opts), _answers(tmp_path, [])
    assert s3 == local
    assert all(s3) and ("preview/pr-7" in {r[2] for r in s3[0]})
    ds = open_dataset(url, opts)
    versions = {name: ds.table(name).version() for name in ("branches", "branch_versions")}
    # Nothing changed: no listing read, no names table rewritten.
    assert run_sync(sim, url, opts).outcome == "ok"
    ds = open_dataset(url, opts)
    assert {name: ds.table(name).version() for name in versions} == versions
    # A rename read on both: two versions on S3 as locally.
    sim.change_branch(branch_id, name="release/7")
    for target, options in ((url, opts), (str(tmp_path), [])):
        assert run_sync(sim, target, options, names_max_age=0).outcome == "ok"
    s3, local = _answers(url, opts), _answers(tmp_path, [])
    assert s3[2] == local[2]
    assert [r[2] for r in s3[2] if r[0] == branch_id] == ["preview/pr-7", "release/7"]
