"""opsaudit wired to object storage (issue 11): sync, readers and the CLI on a loopback S3 server.

The simulator is the platform, moto (a subprocess, conftest.py) is S3; nothing inside opsaudit
is mocked. Every check reads the Delta table back (deltalake / pyarrow) and compares it with the
simulator's ground truth.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.killing import KillWindow

from .conftest import Bucket, run_sync

REPO = Path(__file__).resolve().parents[2]


def _opts(bucket: Bucket) -> list[str]:
    return bucket.storage_options()


def table_rows(url: str, opts: list[str]) -> list[dict[str, Any]]:
    """operation_versions as the Delta log names it (what every reader sees)."""
    from exporter.store.lake import open_dataset

    snap = open_dataset(url, opts).snapshot("operation_versions")
    return [] if snap is None else snap.to_table().to_pylist()


def assert_exact(sim: Any, rows: list[dict[str, Any]]) -> None:
    keys = [(r["id"], r["version"]) for r in rows]
    assert len(keys) == len(set(keys)), "an (id, version) pair appears twice"
    raws = [(r["id"], r["raw"]) for r in rows]
    assert len(raws) == len(set(raws)), "an identical version appears twice"
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for r in rows:
        if r["id"] not in latest or latest[r["id"]][0] < r["version"]:
            latest[r["id"]] = (r["version"], orjson.loads(r["raw"]))
    truth = sim.ground_truth(None)
    got = {k: v for k, (_, v) in latest.items()}
    assert set(got) == set(truth), (len(set(truth) - set(got)), len(set(got) - set(truth)))
    differing = [k for k in truth if truth[k] != got[k]]
    assert not differing, f"{len(differing)} operations differ"


def _cli_env(sim: Any, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPSAUDIT_DATA_DIR"}
    env.update(NEON_API_KEY=sim.personal_key, OPSAUDIT_BASE_URL=sim.base_url)
    env.update(extra or {})
    return env


def _cli(args: list[str], env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=kw.pop("cwd", None),
        timeout=kw.pop("timeout", 120),
    )


def _so(store: Any) -> list[str]:
    """`--storage-option` flags for a Bucket or an Azurite Container (conftest.py)."""
    out = []
    for o in store.storage_options():
        out += ["--storage-option", o]
    return out


def _start_sync(
    sim: Any,
    url: str,
    bucket: Any,
    *extra: str,
    env: dict[str, str] | None = None,
    output: bool = True,
) -> subprocess.Popen[str]:
    """`opsaudit sync --data-dir URL --max-rps 0 EXTRA...` as its own process (the personal key
    unless `env` names another); its output piped, or dropped when `output` is False."""
    pipe = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--data-dir",
            url,
            *_so(bucket),
            "--max-rps",
            "0",
            *extra,
        ],
        env=_cli_env(sim, env),
        stdout=pipe,
        stderr=pipe,
        text=True,
    )


def test_backfill_incremental_faults_and_a_fresh_machine(make_sim: Any, bucket: Bucket) -> None:
    """Backfill, then incremental syncs with mutations and faults, each run a fresh working copy
    (LakeStore restores the state into a new temp dir every time: a new machine)."""
    from exporter.simulator import Faults

    sim = make_sim(seed=5, projects=4, days=3, ops_per_project_per_day=300)
    url, opts = bucket.url("audit/org-1"), _opts(bucket)
    first = run_sync(sim, url, opts)
    assert first.outcome == "ok", first.error
    assert_exact(sim, table_rows(url, opts))
    # No state on this machine at all: the state object beside the table is the checkpoint.
    assert not any(k.endswith(".sqlite") for k in os.listdir("."))
    sim.advance(3600)  # new operations and in-place changes of open ones
    second = run_sync(sim, url, opts)
    assert second.outcome == "ok"
    assert second.new_operations > 0
    assert_exact(sim, table_rows(url, opts))
    sim.faults = Faults(p_5xx=0.1, p_drop=0.05, p_truncate=0.05, seed=3)
    sim.advance(1800)
    third = run_sync(sim, url, opts)
    sim.faults = Faults()
    assert third.outcome in ("ok", "partial")
    fourth = run_sync(sim, url, opts)
    assert fourth.outcome == "ok"
    assert_exact(sim, table_rows(url, opts))
    # A no-change run adds nothing to the table.
    before = len(table_rows(url, opts))
    assert run_sync(sim, url, opts).new_operations == 0
    assert len(table_rows(url, opts)) == before


def _lease_holder(bucket: Bucket, prefix: str) -> str | None:
    try:
        body = bucket.client().get_object(Bucket=bucket.name, Key=f"{prefix}/_opsaudit/lease.json")
    except Exception:
        return None
    lease = json.loads(body["Body"].read())
    return None if lease.get("released") else str(lease.get("holder"))


def test_kill_9_at_random_instants_on_s3(
    make_sim: Any, bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of `opsaudit sync --data-dir s3://...` at random instants after it took the
    lease; the table read between kills never holds a duplicate; a final sync on a fresh
    machine gives exactly the ground truth."""
    from exporter.simulator import Faults

    sim = make_sim(seed=31, projects=5, days=4, ops_per_project_per_day=1200)
    sim.faults = Faults(p_slow=0.3, slow_seconds=0.02, seed=4)
    prefix = "killed"
    url, opts = bucket.url(prefix), _opts(bucket)
    rng = random.Random(99)
    kills, seen, when = 0, [], KillWindow(rng, 0.05, 1.4)
    for _ in range(45):
        if kills >= 10:
            break
        proc = _start_sync(
            sim,
            url,
            bucket,
            "--concurrency",
            "3",
            "--wait",
            env={"OPSAUDIT_LEASE_TTL": "2"},
            output=False,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            if (_lease_holder(bucket, prefix) or "").endswith(f":{proc.pid}"):
                break
            time.sleep(0.02)
        time.sleep(when.delay())
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        when.killed(proc.returncode is None)
        proc.wait()
        rows = table_rows(url, opts)
        keys = [(r["id"], r["version"]) for r in rows]
        assert len(keys) == len(set(keys)), "a reader saw a duplicate between kills"
        seen.append(len(rows))
        sim.advance(rng.uniform(0, 60))
    assert kills >= 10, kills
    assert seen == sorted(seen)  # committed batches only ever add rows
    if os.environ.get("LAKE_TEST_VERBOSE"):
        print("rows seen between kills:", seen)
    sim.faults = Faults()
    monkeypatch.setenv("OPSAUDIT_LEASE_TTL", "2")
    # --wait: the last killed holder's lease expires by itself (ttl 2 s + grace).
    summary = run_sync(sim, url, opts, wait_for_lock=True)
    assert summary.outcome == "ok", summary.error
    # The variable took effect: the lease this run held (and released) had a 2 s ttl.
    lease = bucket.client().get_object(Bucket=bucket.name, Key=f"{prefix}/_opsaudit/lease.json")
    assert json.loads(lease["Body"].read())["ttl_s"] == 2.0
    assert_exact(sim, table_rows(url, opts))


def test_the_next_sync_after_a_kill_9_starts_at_once(make_sim: Any, bucket: Bucket) -> None:
    """Issue 19: after kill -9 of a sync writing to s3://, the next sync on the same machine
    exited 4 ("another opsaudit sync holds the dataset") until the lease expired (124 s with
    --wait). Its holder is a dead process of this machine: the lease is taken at once."""
    sim = make_sim(seed=12, projects=3, days=2, ops_per_project_per_day=1500)
    from exporter.simulator import Faults

    sim.faults = Faults(p_slow=1.0, slow_seconds=0.02, seed=2)  # still running when killed
    prefix = "kill9"
    url = bucket.url(prefix)
    env = {k: v for k, v in _cli_env(sim).items() if k != "OPSAUDIT_LEASE_TTL"}  # 120 s
    proc = _start_sync(sim, url, bucket, env=env, output=False)
    deadline = time.monotonic() + 30
    while not (_lease_holder(bucket, prefix) or "").endswith(f":{proc.pid}"):
        assert proc.poll() is None and time.monotonic() < deadline, "the sync never held the lease"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    sim.faults = Faults()
    started = time.monotonic()
    done = _cli(["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"], env)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert time.monotonic() - started < 60
    assert_exact(sim, table_rows(url, _opts(bucket)))


def test_a_bad_lease_ttl_is_refused_before_anything_is_written(
    make_sim: Any, bucket: Bucket
) -> None:
    """A bad OPSAUDIT_LEASE_TTL was refused (exit 2) only after the location was opened with
    create=True: an empty prefix had its dataset marker written first."""
    sim = make_sim(seed=8, projects=1, days=1, ops_per_project_per_day=20)
    env = _cli_env(sim, {"OPSAUDIT_LEASE_TTL": "2m"})
    done = _cli(["sync", "--data-dir", bucket.url("fresh"), *_so(bucket), "--max-rps", "0"], env)
    assert (done.returncode, done.stdout, done.stderr.splitlines()[-1]) == (
        2,
        "",
        "Error: $OPSAUDIT_LEASE_TTL='2m': seconds, at least 1",
    )
    assert (bucket.list_keys(), sim.stats()["requests"]) == ([], 0)


def test_two_syncs_race_one_exits_4(make_sim: Any, bucket: Bucket) -> None:
    sim = make_sim(seed=8, projects=3, days=2, ops_per_project_per_day=2000)
    from exporter.simulator import Faults

    sim.faults = Faults(p_slow=1.0, slow_seconds=0.02, seed=1)  # long enough to overlap
    url = bucket.url("race")
    procs = [_start_sync(sim, url, bucket) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 4], (codes, outs)
    loser = outs[[p.returncode for p in procs].index(4)][1]
    assert "lease" in loser.lower() or "held" in loser.lower(), loser
    sim.faults = Faults()
    assert_exact(sim, table_rows(url, _opts(bucket)))


def test_one_dataset_per_org_written_at_once_and_read_together(
    make_sim: Any, bucket: Bucket
) -> None:
    """Different prefixes take different leases: one sync per organization runs at the same
    time, both exit 0, and `query --data-dir A --data-dir B` holds every operation once."""
    from exporter.simulator import Faults

    sim = make_sim(
        seed=9, projects=4, orgs=2, shared_projects=0, days=2, ops_per_project_per_day=500
    )
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.1, seed=2)  # long enough to overlap
    urls = [bucket.url(f"audit/{org}") for org in sim.org_ids]
    procs = [
        _start_sync(sim, url, bucket, env={"NEON_API_KEY": sim.org_key(org)})
        for url, org in zip(urls, sim.org_ids)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sim.faults = Faults()
    args = ["query", "--format", "json", *_so(bucket)]
    for url in urls:
        args += ["--data-dir", url]
    done = _cli([*args, "SELECT id, raw, dataset FROM operations"], _cli_env(sim))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == len({r["id"] for r in rows})
    assert {r["id"]: orjson.loads(r["raw"]) for r in rows} == sim.ground_truth()
    assert {r["dataset"] for r in rows} == set(urls)
    # The two runs did overlap in time.
    runs = _cli([*args, "SELECT started_at, finished_at FROM sync_runs"], _cli_env(sim))
    spans = json.loads(runs.stdout)
    assert max(r["started_at"] for r in spans) < min(r["finished_at"] for r in spans), spans


def test_readers_agree_with_a_local_run(make_sim: Any, bucket: Bucket, tmp_path: Path) -> None:
    """query / report / status / check / compact on the S3 dataset give the figures of the
    same sync into a local directory; Polars reads the same table."""
    sim = make_sim(seed=12, projects=3, days=2, ops_per_project_per_day=400)
    url = bucket.url("readers")
    env = _cli_env(sim)
    local = tmp_path / "local"
    for target in (url, str(local)):
        extra = _so(bucket) if target == url else []
        done = _cli(["sync", "--data-dir", target, *extra, "--max-rps", "0"], env)
        assert done.returncode == 0, done.stderr
    sql = (
        "SELECT action, status, count(*) AS n, sum(total_duration_ms) AS d FROM operations "
        "GROUP BY ALL ORDER BY ALL"
    )
    q_s3 = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "json", sql], env)
    q_local = _cli(["query", "--data-dir", str(local), "--format", "json", sql], env)
    assert q_s3.returncode == 0, q_s3.stderr
    assert json.loads(q_s3.stdout) == json.loads(q_local.stdout)
    assert json.loads(q_s3.stdout)
    counts = (
        "SELECT (SELECT count(*) FROM operation_versions), (SELECT count(*) FROM projects), "
        "(SELECT count(*) FROM sync_runs)"
    )
    c_s3 = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "csv", counts], env)
    c_local = _cli(["query", "--data-dir", str(local), "--format", "csv", counts], env)
    assert c_s3.stdout == c_local.stdout, (c_s3.stdout, c_s3.stderr)
    r_s3 = _cli(["report", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    r_local = _cli(["report", "--data-dir", str(local), "--format", "json"], env)
    assert r_s3.returncode == 0, r_s3.stderr
    a, b = json.loads(r_s3.stdout), json.loads(r_local.stdout)
    assert a["failures"] == b["failures"] and a["action_mix"] == b["action_mix"]
    assert a["durations"] == b["durations"]
    st = _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    assert st.returncode == 0, st.stderr
    assert len(json.loads(st.stdout)["projects"]) == len(
        json.loads(_cli(["status", "--data-dir", str(local), "--format", "json"], env).stdout)[
            "projects"
        ]
    )
    ck = _cli(["check", "--data-dir", url, *_so(bucket), "--max-age", "1000d"], env)
    assert ck.returncode in (0, 8), ck.stderr
    cp = _cli(["compact", "--data-dir", url, *_so(bucket)], env)
    assert cp.returncode == 0, cp.stderr
    # Merged, not deleted: VACUUM deletes them once past its retention ("removed" read as gone).
    assert re.fullmatch(
        r"compaction merged away \d+ file\(s\) \(on object storage the old ones are deleted "
        r"once 24 hours old\)\n",
        cp.stdout,
    ), cp.stdout
    c_after = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "csv", counts], env)
    assert c_after.stdout == c_local.stdout
    import polars as pl

    from exporter.store.lake import open_dataset

    ds = open_dataset(url, _opts(bucket))
    n = pl.scan_delta(ds.location.table_uri("operation_versions"), storage_options=ds.options)
    assert n.select(pl.len()).collect().item() == int(c_local.stdout.splitlines()[1].split(",")[0])
    # Row for row: opsaudit query (DuckDB over the snapshot), Polars and deltalake/pyarrow.
    cols = ["id", "version", "status", "total_duration_ms", "created_month"]
    rows_sql = f"SELECT {', '.join(cols[:-1])}, strftime(created_date, '%Y-%m') AS created_month FROM operation_versions ORDER BY id, version"
    via_cli = json.loads(
        _cli(["query", "--data-dir", url, *_so(bucket), "--format", "json", rows_sql], env).stdout
    )
    via_polars = n.select(cols).sort(["id", "version"]).collect().to_dicts()
    snap = ds.snapshot("operation_versions")
    assert snap is not None
    via_arrow = sorted(
        snap.to_table(columns=cols).to_pylist(), key=lambda r: (r["id"], r["version"])
    )
    assert via_cli == via_polars == via_arrow
    assert len(via_cli) > 1000


def test_bad_scheme_and_missing_dataset(bucket: Bucket, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPSAUDIT_DATA_DIR"}
    env["NEON_API_KEY"] = "k"
    for bad in ("ftp://host/x", "hdfs://nn/x", "s3:/bucket", "https://example.com/x"):
        done = _cli(["sync", "--data-dir", bad], env, cwd=tmp_path)
        assert done.returncode == 2, (bad, done.stderr)
        assert not any(tmp_path.iterdir()), "a local folder was created"
    done = _cli(["query", "--data-dir", bucket.url("nothing"), *_so(bucket), "SELECT 1"], env)
    assert done.returncode == 6 and "no opsaudit dataset" in done.stderr, done.stderr
    done = _cli(["status", "--data-dir", str(tmp_path), "--storage-option", "A=b"], env)
    assert done.returncode == 2


def test_open_store_picks_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from exporter.core.errors import ConfigError
    from exporter.store.local.dataset import Dataset
    from exporter.store.opener import open_store

    for value in (tmp_path / "a", str(tmp_path / "b"), f"file://{tmp_path}/c"):
        store = open_store(value, [], lock=True, wait=False)
        try:
            assert isinstance(store, Dataset)  # local: plain Hive Parquet, no Delta log
        finally:
            store.close()
    assert not any((tmp_path / "c").glob("**/_delta_log"))
    with pytest.raises(ConfigError, match="unsupported scheme"):
        open_store("ftp://host/x", [], lock=True, wait=False)
    with pytest.raises(ConfigError, match="object storage"):
        open_store(tmp_path / "d", ["AWS_REGION=x"], lock=True, wait=False)
    monkeypatch.setitem(sys.modules, "deltalake", None)  # the lake extra is not installed
    with pytest.raises(ConfigError, match=r"opsaudit\[lake\]"):
        open_store("s3://bucket/x", [], lock=True, wait=False)


def _killed(code: str, args: list[str], env: dict[str, str]) -> None:
    """Run `code` (which kills itself with SIGKILL at some step) with the CLI's `args`."""
    killed = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]


# `opsaudit sync` killed (SIGKILL) once its commits are made, at the start of its compaction.
_KILLED_AFTER_ITS_COMMITS = """
import os, signal
from exporter.store.lake.store import LakeStore
LakeStore.compact = lambda self, partitions=None: os.kill(os.getpid(), signal.SIGKILL)
from exporter.cli import main
main()  # click reads sys.argv[1:]: the arguments after -c's code
"""


def test_a_killed_run_on_s3_is_recorded_with_the_versions_its_commits_wrote(
    make_sim: Any, bucket: Bucket
) -> None:
    """A Delta dataset's killed run said 0 versions written in `sync_runs` while its commits
    held every version it read: its commits are not files of the state's files table, so each
    commit now counts its rows in the state it uploads."""
    sim = make_sim(seed=56, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("killed-count")
    env = _cli_env(sim)
    args = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    _killed(_KILLED_AFTER_ITS_COMMITS, args, env)
    # Before the next sync: the run is shown killed (it said `running` until then).
    status = _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    assert [r["outcome"] for r in json.loads(status.stdout)["runs"]] == ["killed"]
    assert _cli(args, env).returncode == 0
    sql = (
        "SELECT r.outcome, r.versions_written, (SELECT count(*) FROM operation_versions v "
        "WHERE v.run_id = r.run_id) AS rows FROM sync_runs r ORDER BY r.started_at"
    )
    done = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "jsonl", sql], env)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    truth = len(sim.ground_truth())
    assert rows == [
        {"outcome": "killed", "versions_written": truth, "rows": truth},
        {"outcome": "ok", "versions_written": 0, "rows": 0},
    ]


# `opsaudit sync` killed (SIGKILL) at its first commit, before anything of it is uploaded.
_KILLED_BEFORE_ITS_FIRST_COMMIT = """
import os, signal
from exporter.store.lake.store import LakeStore
LakeStore.commit = lambda self, *a, **k: os.kill(os.getpid(), signal.SIGKILL)
from exporter.cli import main
main()  # click reads sys.argv[1:]: the arguments after -c's code
"""


def test_a_run_killed_before_its_first_commit_on_s3_is_recorded(
    make_sim: Any, bucket: Bucket
) -> None:
    """A Delta dataset's run killed before its first commit left no row in `sync_runs` (one
    row per sync, PRODUCT.md): its row was only in its local state. The lease names the run:
    readers show it killed, and the next sync records it so. So is a run killed so before it:
    the lease that replaced its own names it too (the second kill lost the first's row)."""
    sim = make_sim(seed=57, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("killed-early")
    env = _cli_env(sim)
    args = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    assert _cli(args, env).returncode == 0
    _killed(_KILLED_BEFORE_ITS_FIRST_COMMIT, args, env)
    status = _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    assert [r["outcome"] for r in json.loads(status.stdout)["runs"]] == ["killed", "ok"]
    _killed(_KILLED_BEFORE_ITS_FIRST_COMMIT, args, env)
    status = _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    assert [r["outcome"] for r in json.loads(status.stdout)["runs"]] == ["killed", "killed", "ok"]
    assert _cli(args, env).returncode == 0
    sql = "SELECT outcome, versions_written FROM sync_runs ORDER BY started_at"
    done = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "jsonl", sql], env)
    assert [tuple(json.loads(line).values()) for line in done.stdout.splitlines()] == [
        ("ok", len(sim.ground_truth())),
        ("killed", 0),
        ("killed", 0),
        ("ok", 0),
    ]


def test_sync_runs_and_the_report_show_killed_and_refused_runs_at_once_on_s3(
    make_sim: Any, bucket: Bucket
) -> None:
    """On object storage `sync_runs` is the Delta table rewritten at the end of a run, so after
    a kill -9 (or a run whose upload the store refused) `opsaudit query` and the report lacked
    the run until the next sync (the report: last run `ok`, or no run at all), while `status`,
    `check` and the metrics said `killed` / `failed`; a local directory's view shows it at once
    (README: the same views). The view takes the runs as `status` settles them."""
    sim = make_sim(seed=58, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("killed-view")
    env = _cli_env(sim)
    args = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    sql = "SELECT outcome, finished_at IS NULL AS unfinished FROM sync_runs ORDER BY started_at"
    query = ["query", "--data-dir", url, *_so(bucket), "--format", "json", sql]
    report = ["report", "--data-dir", url, *_so(bucket), "--format", "json"]

    def views() -> tuple[list[tuple[str, bool]], str]:
        done = _cli(query, env)
        assert done.returncode == 0, done.stderr
        shown = _cli(report, env)
        assert shown.returncode == 0, shown.stderr
        last = json.loads(shown.stdout)["freshness"]["last_run_outcome"]
        return [(r["outcome"], r["unfinished"]) for r in json.loads(done.stdout)], last

    _killed(_KILLED_AFTER_ITS_COMMITS, args, env)  # the first run: its commits landed
    assert views() == ([("killed", True)], "killed")
    _killed(_KILLED_BEFORE_ITS_FIRST_COMMIT, args, env)  # known only by the lease it left
    assert views() == ([("killed", True), ("killed", True)], "killed")
    assert _cli(args, env).returncode == 0
    assert views() == ([("killed", True), ("killed", True), ("ok", False)], "ok")
    sim.advance(600)
    bucket.server.deny("PUT", r".*/killed-view/_opsaudit/state/")
    assert _cli(args, env).returncode == 2  # refused: the lease it released names it
    assert views() == (
        [("killed", True), ("killed", True), ("ok", False), ("failed", False)],
        "failed",
    )


def test_a_corrupt_state_object_is_named_not_its_temporary_copy(
    make_sim: Any, bucket: Bucket
) -> None:
    """A corrupt state object on S3: the message named a local temporary copy, deleted by
    then, and advised moving it away. It names the object's batch and what can be done."""
    sim = make_sim(seed=58, projects=1, shared_projects=0, days=1, ops_per_project_per_day=20)
    url = bucket.url("corrupt-state")
    env = _cli_env(sim)
    assert _cli(["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"], env).returncode == 0
    states = sorted(k for k in bucket.list_keys("corrupt-state/_opsaudit/state/"))
    bucket.client().put_object(Bucket=bucket.name, Key=states[-1], Body=b"garbage" * 100)
    batch = int(states[-1].rsplit("/", 1)[1].split("-")[0])
    expected = (
        f"Error: {url}: the state object of batch {batch} (_opsaudit/state/...) is corrupt or "
        "not an opsaudit state; it was left untouched: restore it from a backup (the bucket's "
        "object versions), or start a new dataset under another prefix\n"
    )
    for command in (["status"], ["check"], ["sync", "--max-rps", "0"]):
        done = _cli([*command, "--data-dir", url, *_so(bucket)], env)
        assert (done.returncode, done.stderr) == (6, expected), command


def test_readers_tell_a_newer_state_and_an_unreadable_lease_from_a_corrupt_state(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    """A state written by a newer opsaudit says "upgrade", not "corrupt: restore a backup";
    a lease the store would not hand out once leaves `status` working (the runs as
    committed), not "corrupt" either."""
    import sqlite3

    sim = make_sim(seed=63, projects=1, shared_projects=0, days=1, ops_per_project_per_day=20)
    url = bucket.url("newer-state")
    env = _cli_env(sim)
    assert _cli(["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"], env).returncode == 0
    status = ["status", "--data-dir", url, *_so(bucket), "--format", "json"]
    bucket.server.deny("GET", r".*/newer-state/_opsaudit/lease\.json$")
    denied = _cli(status, env)
    assert denied.returncode == 0, denied.stderr
    assert [r["outcome"] for r in json.loads(denied.stdout)["runs"]] == ["ok"]
    bucket.server.disarm()
    key = sorted(bucket.list_keys("newer-state/_opsaudit/state/"))[-1]  # the last batch's
    local = tmp_path / "state.sqlite"
    local.write_bytes(bucket.client().get_object(Bucket=bucket.name, Key=key)["Body"].read())
    con = sqlite3.connect(local)
    con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'format_version'")
    con.commit()
    con.close()
    bucket.client().put_object(Bucket=bucket.name, Key=key, Body=local.read_bytes())
    for command in (status, ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]):
        done = _cli(command, env)
        assert done.returncode == 6 and "was written by a newer opsaudit" in done.stderr, command
        assert "corrupt" not in done.stderr


@pytest.mark.parametrize(
    "refused",
    [
        "_opsaudit/state/",
        # Its own export: the state uploaded just before said the run went well (`ok`).
        "sync_runs/_delta_log/",
    ],
)
def test_a_run_that_could_not_write_the_store_is_recorded_failed(
    make_sim: Any, bucket: Bucket, tmp_path: Path, refused: str
) -> None:
    """A run whose upload the store refused (exit 2) left no trace: its row was only in its
    local copy of the state, the lease that named it was released as after any run, so
    `sync_runs`, `status` and the metrics showed the run before it (`ok`) and the next run
    never recorded it. The released lease now names it, ended: readers and the next run
    record it `failed`, with its error."""
    sim = make_sim(seed=64, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("refused")
    env = _cli_env(sim)
    sync = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    prom = tmp_path / "opsaudit.prom"
    assert _cli(sync, env).returncode == 0
    sim.advance(600)
    bucket.server.deny("PUT", rf".*/refused/{refused}")
    refused = _cli([*sync, "--metrics-file", str(prom)], env)
    assert refused.returncode == 2, refused.stderr
    status = ["status", "--data-dir", url, *_so(bucket), "--format", "json"]
    runs = json.loads(_cli(status, env).stdout)["runs"]
    assert [r["outcome"] for r in runs] == ["failed", "ok"]
    assert runs[0]["finished_at"] is not None
    metrics = prom.read_text()
    assert 'opsaudit_last_run_outcome{outcome="failed"} 1' in metrics
    assert _cli(sync, env).returncode == 0  # records it for good with its first commit
    runs = json.loads(_cli(status, env).stdout)["runs"]
    assert [r["outcome"] for r in runs] == ["ok", "failed", "ok"]
    sql = "SELECT outcome, error FROM sync_runs ORDER BY started_at"
    query = _cli(["query", "--data-dir", url, *_so(bucket), "--format", "json", sql], env)
    recorded = json.loads(query.stdout)
    assert [r["outcome"] for r in recorded] == ["ok", "failed", "ok"]
    assert "access denied" in recorded[1]["error"], recorded[1]
    assert assert_exact(sim, table_rows(url, _opts(bucket))) is None


def test_a_refused_data_upload_keeps_json_logs_one_object_a_line(
    make_sim: Any, bucket: Bucket
) -> None:
    """delta-rs' writer, its data file's upload refused, prints a Rust panic on fd 2 ("thread
    'tokio-rt-worker' panicked at ... Already shut down"): with --log-format json, stderr had
    lines a log shipper could not read. They are a record of the `opsaudit.stderr` logger."""
    sim = make_sim(seed=66, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("refused-data")
    bucket.server.deny("PUT", r".*/refused-data/operation_versions/created_month=")
    sync = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0", "--log-format", "json"]
    done = _cli(sync, _cli_env(sim, {"RUST_BACKTRACE": "1"}))
    assert done.returncode == 2, done.stderr
    records = [orjson.loads(line) for line in done.stderr.splitlines()]  # each one JSON
    relayed = [r for r in records if r["logger"] == "opsaudit.stderr"]
    assert len(relayed) >= 1 and "panicked" in relayed[0]["message"], records
    assert relayed[0]["level"] == "warning"
    assert records[-1]["exit_code"] == 2


def test_a_first_run_the_store_refused_is_shown_before_any_batch(
    make_sim: Any, bucket: Bucket, tmp_path: Path
) -> None:
    """The first run on a prefix, refused its first upload, left no batch: `status` said "no
    dataset yet" (exit 6), `check` "no sync has run", and the run's own metrics file was
    empty, though the lease it released named the run, failed."""
    sim = make_sim(seed=65, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("refused-first")
    env = _cli_env(sim)
    prom = tmp_path / "opsaudit.prom"
    bucket.server.deny("PUT", r".*/refused-first/_opsaudit/state/")
    sync = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    refused = _cli([*sync, "--metrics-file", str(prom)], env)
    assert refused.returncode == 2, refused.stderr
    status = _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env)
    assert status.returncode == 0, status.stderr
    assert [r["outcome"] for r in json.loads(status.stdout)["runs"]] == ["failed"]
    assert 'opsaudit_last_run_outcome{outcome="failed"} 1' in prom.read_text()
    check = _cli(["check", "--data-dir", url, *_so(bucket)], env)
    assert check.returncode == 8 and "no sync has run" not in check.stdout, check.stdout
    assert _cli(sync, env).returncode == 0
    recorded = json.loads(
        _cli(["status", "--data-dir", url, *_so(bucket), "--format", "json"], env).stdout
    )["runs"]
    assert [r["outcome"] for r in recorded] == ["ok", "failed"]


@pytest.mark.parametrize("table", ["sync_runs", "branches"])
def test_a_damaged_commit_file_of_a_side_table_is_named_with_its_fix(
    make_sim: Any, bucket: Bucket, table: str
) -> None:
    """A commit file of a side table's log that is not JSON (cut, or written by something
    else) made every later sync exit 6 (its operations committed all the same) and every
    reader too, with "cannot read table sync_runs in s3://...: Kernel error: Json error:
    ...": no file, no way out. The error names the table and the file and says what to do;
    done, the next sync is ok again and nothing is lost."""
    sim = make_sim(seed=71, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    url = bucket.url("damaged")
    env = _cli_env(sim)
    sync = ["sync", "--data-dir", url, *_so(bucket), "--max-rps", "0"]
    query = ["query", "--data-dir", url, *_so(bucket), "SELECT count(*) FROM sync_runs"]
    assert _cli(sync, env).returncode == 0
    logs = sorted(k for k in bucket.list_keys(f"damaged/{table}/_delta_log/") if k.endswith("json"))
    name = f"{table}/_delta_log/{int(logs[-1].rsplit('/', 1)[1][:-5]) + 1:020d}.json"
    bucket.client().put_object(Bucket=bucket.name, Key=f"damaged/{name}", Body=b'{"commitInfo":{')
    again = {
        "sync_runs": "the next sync writes it again",
        "branches": "it reads as of the commit before until the names next change",
    }[table]
    expected = (
        f"Error: {url}: table {table} cannot be read: its log file {name} is not a Delta commit "
        "(Kernel error: Json error: Truncated record whilst reading object); opsaudit writes "
        "each commit file whole, so something else wrote or cut it. Fix: move "
        f"{name} out of {table}/_delta_log/ (keep it: it shows what wrote it), then run "
        f"`opsaudit sync`; {table} holds nothing the state does not: {again}\n"
    )
    done = _cli(query, env)
    assert (done.returncode, done.stderr) == (6, expected)
    if table == "sync_runs":
        sim.advance(600)
        done = _cli(sync, env)
        assert (done.returncode, done.stderr) == (6, expected)
        assert_exact(sim, table_rows(url, _opts(bucket)))  # its operations were committed
    bucket.client().delete_object(Bucket=bucket.name, Key=f"damaged/{name}")
    assert _cli(sync, env).returncode == 0
    done = _cli(query, env)
    assert done.returncode == 0, done.stderr


def test_a_stop_ends_a_sync_waiting_for_the_lease(make_sim: Any, bucket: Bucket) -> None:
    """A sync waiting for the lease (`--wait`) slept through its stop (Ctrl-C, SIGTERM: the
    CLI's handler sets it) until the other writer was done, then synced. The stop now ends the
    wait at once: `StoppedError` (exit 130, 143 for SIGTERM), no request sent."""
    import datetime as dt
    import threading

    from exporter.core.errors import StoppedError
    from exporter.engine.sync import SyncConfig, sync
    from exporter.store.lake import open_dataset

    sim = make_sim(seed=12, projects=1, days=1, ops_per_project_per_day=20)
    url, opts = bucket.url("waiting"), _opts(bucket)
    assert run_sync(sim, url, opts).outcome == "ok"
    # A live writer of this machine (this process), whose lease lapses soon: a wait that
    # ignores the stop ends in a sync, not in the test's timeout.
    held = open_dataset(url, opts).lease(ttl=dt.timedelta(seconds=2))
    held.acquire()
    stop = threading.Event()
    config = SyncConfig(
        data_dir=url,
        storage_options=opts,
        api_key=sim.personal_key,
        base_url=sim.base_url,
        wait_for_lock=True,
    )
    try:
        threading.Timer(1.0, stop.set).start()
        before, started = sim.stats()["requests"], time.monotonic()
        with pytest.raises(StoppedError) as err:
            sync(config, stop=stop)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        held.release()
    assert (err.value.exit_code, str(err.value)) == (
        130,
        f"stopped while waiting for the lease on {held.where} (another opsaudit sync holds it): "
        "nothing was read or written; the next run syncs",
    )
    assert 0.9 < elapsed < 1.5, f"{elapsed:.1f}s"
    assert sim.stats()["requests"] == before
