"""Names on object storage (issue 21): the names tables are Delta tables like the others, read
by the same views; a run whose listings change nothing rewrites none of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import exporter

from .conftest import Bucket, run_sync

REPO = Path(__file__).resolve().parents[2]

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


# Where the sync is killed (the S3 server kills it on that request): in the middle of the names
# tables (branches written, branch_versions not), just before them, and just after the
# operations' commit.
_KILLS = [
    ("PUT", r"/branches/_delta_log/", "before"),
    ("PUT", r"/branch_versions/_delta_log/", "before"),
    ("PUT", r"/operation_versions/_delta_log/", "after"),
]


def _committed_names(url: str, opts: list[str], tmp: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What the committed state (the one the table's txn version names) says the names are."""
    from exporter.core.names import TABLES
    from exporter.store.lake import open_dataset
    from exporter.store.state import StateDB

    path = tmp / f"committed-{len(list(tmp.iterdir()))}.sqlite"
    if open_dataset(url, opts).restore_state(path) is None:
        return {"branches": [], "branch_versions": [], "endpoints": [], "project_versions": []}
    state = StateDB(path)
    try:
        rows = {t.name: state.names_rows(t) for t in TABLES}
    finally:
        state.close()
    return {
        "branches": sorted((r["id"], r["name"]) for r in rows["branches"]),
        "branch_versions": sorted(
            (r["id"], r["version"], r["name"]) for r in rows["branch_versions"]
        ),
        "endpoints": sorted((r["id"], r["name"]) for r in rows["endpoints"]),
        "project_versions": sorted((r["id"], r["version"]) for r in rows["project_versions"]),
    }


def _views(url: str, opts: list[str]) -> tuple[dict[str, list[tuple[Any, ...]]], list[Any]]:
    con = exporter.connect(url, storage_options=opts)
    try:
        views = {
            "branches": con.execute("SELECT id, name FROM branches ORDER BY id").fetchall(),
            "branch_versions": con.execute(
                "SELECT id, version, name FROM branch_versions ORDER BY id, version"
            ).fetchall(),
            "endpoints": con.execute("SELECT id, name FROM endpoints ORDER BY id").fetchall(),
            "project_versions": con.execute(
                "SELECT id, version FROM project_versions ORDER BY id, version"
            ).fetchall(),
        }
        # Operations whose branch a listing named, shown without its name.
        unnamed = con.execute(
            "SELECT o.id FROM operations o JOIN branches b ON b.id = o.branch_id "
            "WHERE o.branch_name IS NULL"
        ).fetchall()
        ops = con.execute("SELECT DISTINCT branch_id FROM operations").fetchall()
    finally:
        con.close()
    return views, [unnamed, ops]


def _sync_process(sim: Any, url: str, opts: list[str], *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NEON_API_KEY": sim.personal_key}
    cmd = [sys.executable, "-m", "exporter", "sync", "--data-dir", url, "--base-url", sim.base_url]
    cmd += ["--max-rps", "0", *extra]
    for opt in opts:
        cmd += ["--storage-option", opt]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )


@pytest.mark.parametrize(("method", "pattern", "when"), _KILLS)
def test_a_kill_between_the_operations_and_the_names_leaves_nothing_half_written(
    make_sim: Any, bucket: Bucket, tmp_path: Path, method: str, pattern: str, when: str
) -> None:
    """Issue 21: the names tables are written in the same commit as the operations they
    explain. Killed anywhere around that commit, every reader sees names exactly as the
    committed state has them (none of a commit that did not land, all of one that did), so an
    operation's branch is never shown without its name; the next run continues and agrees."""
    sim = make_sim(seed=53, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url, opts = bucket.url("killed"), bucket.storage_options()
    proc = _sync_process(sim, url, opts)
    bucket.server.arm(proc.pid, method, pattern, when)
    try:
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    committed = _committed_names(url, opts, tmp_path)
    views, (unnamed, _ops) = _views(url, opts)
    assert views == committed
    assert unnamed == []
    # The next run (the lease of the killed writer is taken over at once) finishes the work.
    assert run_sync(sim, url, opts).outcome == "ok"
    committed = _committed_names(url, opts, tmp_path)
    views, (unnamed, ops) = _views(url, opts)
    assert views == committed
    assert unnamed == [] and len(views["branches"]) >= 2
    named = {b for b, _ in views["branches"]}
    assert {b for (b,) in ops if b is not None} <= named


def test_names_an_attempt_left_are_not_taken_by_the_next_commit(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    """A rename read by a run killed after its names tables were written, before its
    operations' commit: the next run (no listing due, so no names of its own to write) commits
    the same batch number. Its readers must not take the killed attempt's names for its own:
    the next writer rewrites them from the committed state first."""
    sim = make_sim(seed=54, projects=1, shared_projects=0, days=1, ops_per_project_per_day=20)
    url, opts = bucket.url("orphans"), bucket.storage_options()
    assert run_sync(sim, url, opts).outcome == "ok"
    pid = sim.project_ids()[0]
    branch_id, _endpoint, _ops = sim.add_branch(pid, "preview/pr-8")
    assert run_sync(sim, url, opts).outcome == "ok"
    sim.change_branch(branch_id, name="release/8")
    proc = _sync_process(sim, url, opts, "--names-max-age", "0")
    bucket.server.arm(proc.pid, "PUT", r"/operation_versions/_delta_log/", "before")
    try:
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    views, _ = _views(url, opts)
    assert views == _committed_names(url, opts, tmp_path)
    assert [n for b, n in views["branches"] if b == branch_id] == ["preview/pr-8"]
    # Within --names-max-age: no listing read, no names changed by this run.
    assert run_sync(sim, url, opts).outcome == "ok"
    views, (unnamed, _ops) = _views(url, opts)
    assert views == _committed_names(url, opts, tmp_path)
    assert [n for b, n in views["branches"] if b == branch_id] == ["preview/pr-8"]
    assert unnamed == []
