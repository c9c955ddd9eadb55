"""Sync benchmarks against the simulator (issue 6): requests vs minimum, CPU/op, RSS, pacing.

The simulator runs in its own process; each sync runs as `python -m exporter sync` in a child
process whose CPU time (user + sys) and peak RSS come from wait4's rusage, so the figures are the
client's alone. Results are printed as one JSON object per scenario and appended to
bench/results/sync.jsonl.

    python bench/sync_bench.py requests            # backfill + no-change incremental ratios
    python bench/sync_bench.py cpu --ops 1000000   # CPU per exported operation
    python bench/sync_bench.py cpu --ops 200000 --baseline-code OLD --runs 3  # OLD, this, ... x3
    python bench/sync_bench.py cpu --ops 200000 --bytecode  # modules read from .pyc, as installed
    python bench/sync_bench.py rss --ops 200000 1000000 2000000
    python bench/sync_bench.py paced --scale 10    # real limits (time-scaled): wall/floor, 429 share
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _serve(conn: Any, config: dict[str, Any], limits: dict[str, Any] | None) -> None:
    from exporter.simulator import RateLimits, SimConfig, Simulator

    sim = Simulator(SimConfig(**config))
    if limits:
        sim.rate_limits = RateLimits(**limits)
    sim.start()
    conn.send(
        {
            "base_url": sim.base_url,
            "key": sim.personal_key,
            "projects": len(sim.project_ids()),
            "ops": {pid: len(sim.ground_truth([pid])) for pid in sim.project_ids()},
            "orgs": len(sim.org_ids),
            "org_projects": [len(sim.project_ids(org)) for org in sim.org_ids],
        }
    )
    conn.recv()  # block until told to stop
    sim.stop()


class SimProcess:
    """The simulator in a separate process, so its CPU never counts as the client's."""

    def __init__(self, config: dict[str, Any], limits: dict[str, Any] | None = None):
        self.parent, child = mp.Pipe()
        self.proc = mp.get_context("spawn").Process(target=_serve, args=(child, config, limits))
        self.proc.start()
        self.info: dict[str, Any] = self.parent.recv()

    def stats(self) -> dict[str, Any]:
        base = self.info["base_url"].rsplit("/api/v2", 1)[0]
        return httpx.get(f"{base}/_sim/stats").json()  # type: ignore[no-any-return]

    def reset(self) -> None:
        base = self.info["base_url"].rsplit("/api/v2", 1)[0]
        httpx.post(f"{base}/_sim/reset")

    def close(self) -> None:
        self.parent.send("stop")
        self.proc.join(30)


def run_sync(
    sim: SimProcess, data_dir: Path, *extra: str, cwd: Path | None = None
) -> dict[str, Any]:
    """`opsaudit sync` in a child process; `cwd`: the root of the checkout to run (`python -m`
    puts the working directory first on sys.path, before PYTHONPATH)."""
    env = {
        **os.environ,
        "NEON_API_KEY": sim.info["key"],
        "OPSAUDIT_BASE_URL": sim.info["base_url"],
        "OPSAUDIT_DATA_DIR": str(data_dir),
    }
    cmd = [sys.executable, "-m", "exporter", "sync", "--log-format", "json", *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    summary = [json.loads(line) for line in out.splitlines() if b'"summary"' in line]
    if proc.returncode != 0 or not summary:
        raise SystemExit(f"sync failed with exit code {proc.returncode}: {out[-2000:]!r}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "max_rss_mb": round(usage.ru_maxrss / 1024, 1),
        **compaction_written(data_dir),
        "summary": summary[0],
    }


def compaction_written(data_dir: Path) -> dict[str, int]:
    """Rows and bytes the run's compactions wrote (their outputs still live), and the files
    readers are left with: what the end of a backfill rewrote (issue 24)."""
    import sqlite3

    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        rows, size = con.execute(
            "SELECT coalesce(sum(rows), 0), coalesce(sum(bytes), 0) FROM files "
            "WHERE state = 'live' AND run_id = 'compaction'"
        ).fetchone()
        (files,) = con.execute("SELECT count(*) FROM files WHERE state = 'live'").fetchone()
    finally:
        con.close()
    return {"compacted_rows": rows, "compacted_bytes": size, "live_files": files}


def minimum_requests(info: dict[str, Any], new_per_project: dict[str, int] | None = None) -> int:
    """PRODUCT.md: ceil((n+1)/1000) pages per project plus ceil((P+1)/100) per org listed; a
    backfill (`new_per_project` None) also lists each project's branches and endpoints (names:
    2 requests; the simulator's projects have far fewer than 10,000 branches)."""
    ops = new_per_project if new_per_project is not None else info["ops"]
    pages = sum(math.ceil((n + 1) / 1000) for n in ops.values())
    if new_per_project is None:
        pages += 2 * len(ops)
    # Each organization's listing, plus the shared-projects listing (one more scope to list).
    in_orgs = sum(info["org_projects"])
    listing = sum(math.ceil((n + 1) / 100) for n in info["org_projects"])
    listing += math.ceil((info["projects"] - in_orgs + 1) / 100)
    return pages + listing


def refresh_floor(data_dir: Path, page_size: int = 1000) -> dict[str, int]:
    """Extra requests beyond one page per project that refreshing open operations needs at
    least (PRODUCT.md): per project, `min over k >= 1 of (k - 1) + (open operations below page
    k)`, with each open operation's page known exactly from its place in the newest-first list."""
    import sqlite3

    import duckdb

    con = sqlite3.connect(data_dir / "state.sqlite")
    open_ids: dict[str, set[str]] = {}
    for pid, op_id in con.execute(
        "SELECT project_id, id FROM open_ops "
        "WHERE status IS NULL OR status NOT IN ('finished', 'cancelled', 'skipped')"
    ):
        open_ids.setdefault(pid, set()).add(op_id)
    files = [
        str(data_dir / f)
        for (f,) in con.execute(
            "SELECT path FROM files WHERE state = 'live' AND path LIKE 'operation_versions/%'"
        )
    ]
    con.close()
    db = duckdb.connect()
    extra = {}
    for pid, ids in open_ids.items():
        rows = db.execute(
            "SELECT id FROM read_parquet(?) WHERE project_id = ? AND version = 1 "
            "ORDER BY created_at DESC, observed_at",
            [files, pid],
        ).fetchall()
        pages = [i // page_size + 1 for i, (op_id,) in enumerate(rows) if op_id in ids]
        last = max(pages, default=1)
        extra[pid] = min((k - 1) + sum(1 for p in pages if p > k) for k in range(1, last + 1))
    return extra


def record(name: str, result: dict[str, Any]) -> None:
    result = {
        "bench": name,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        **result,
    }
    print(json.dumps(result))
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "sync.jsonl", "a") as fh:
        fh.write(json.dumps(result) + "\n")


def bench_requests(args: argparse.Namespace) -> None:
    config = {
        "seed": 1,
        "projects": args.projects,
        "days": args.days,
        "ops_per_project_per_day": args.ops_per_day,
    }
    sim = SimProcess(config)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            back = run_sync(sim, Path(tmp), "--max-rps", "0")
            used = sim.stats()["requests"]
            minimum = minimum_requests(sim.info)
            record(
                "requests-backfill",
                {
                    "ops": sum(sim.info["ops"].values()),
                    "projects": sim.info["projects"],
                    "requests": used,
                    "minimum": minimum,
                    "ratio": round(used / minimum, 4),
                    **back,
                },
            )
            refresh = refresh_floor(Path(tmp))
            sim.reset()
            # Every open operation re-read (the strict policy): the refresh's cost at its
            # largest. The default schedule's cron runs: bench/schedule_bench.py.
            inc = run_sync(sim, Path(tmp), "--max-rps", "0", "--refresh-open-every", "0")
            used = sim.stats()["requests"]
            # No new operations: one page per project, or what refreshing its open operations
            # takes if that is more (PRODUCT.md: "plus what it takes to refresh operations still
            # open from before").
            minimum = minimum_requests(sim.info, {p: 0 for p in sim.info["ops"]})
            minimum += sum(refresh.values())
            record(
                "requests-incremental-no-change",
                {
                    "projects": sim.info["projects"],
                    "requests": used,
                    "minimum": minimum,
                    "ratio": round(used / minimum, 4),
                    "open_operations": inc["summary"]["open_operations"],
                    **inc,
                },
            )
    finally:
        sim.close()


def bench_cpu(args: argparse.Namespace) -> None:
    """CPU per exported operation of a backfill; with `--baseline-code OLD`, OLD's sync and this
    checkout's alternate (OLD first) against one simulator per size, each run from its own root,
    `--runs` times: before and after from one invocation, under the same load."""
    codes: list[tuple[str, Path | None]] = [("this", None)]
    if args.baseline_code is not None:
        codes.insert(0, ("baseline", args.baseline_code.resolve()))
    here = os.environ.get("PYTHONPATH")
    if args.bytecode:
        # As a pip install runs: each checkout's modules compiled once, read from .pyc (this box
        # sets PYTHONDONTWRITEBYTECODE=1, so every run compiled opsaudit's ~80 modules again).
        for _, code in codes:
            compileall.compile_dir((code or ROOT) / "exporter", quiet=1)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for total in args.ops:
        projects = args.projects
        per_day = max(1, total // (projects * args.days))
        sim = SimProcess(
            {"seed": 2, "projects": projects, "days": args.days, "ops_per_project_per_day": per_day}
        )
        try:
            for _ in range(args.runs):
                for label, code in codes:
                    root = code if code is not None else ROOT
                    _set_pythonpath(str(code) if code is not None else here)
                    with tempfile.TemporaryDirectory() as tmp:
                        res = run_sync(
                            sim, Path(tmp), "--max-rps", "0", "--concurrency", "4", cwd=root
                        )
                    n = res["summary"]["versions_written"]
                    record(
                        "cpu",
                        {
                            **({"code": label, "root": str(root)} if len(codes) > 1 else {}),
                            "ops": n,
                            "cpu_us_per_op": round(res["cpu_s"] / n * 1e6, 2),
                            "ops_per_s": round(n / res["wall_s"]),
                            "load": round(os.getloadavg()[0], 2),
                            "bytecode": args.bytecode,
                            **res,
                        },
                    )
        finally:
            _set_pythonpath(here)
            sim.close()


def _set_pythonpath(value: str | None) -> None:
    if value is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = value


def bench_paced(args: argparse.Namespace) -> None:
    scale = args.scale
    limits = {
        "enabled": True,
        "per_minute": 700,
        "per_route_per_second": 40,
        "retry_after": True,
        "time_scale": scale,
    }
    sim = SimProcess(
        {
            "seed": 3,
            "projects": args.projects,
            "days": args.days,
            "ops_per_project_per_day": args.ops_per_day,
        },
        limits,
    )
    allowed = 700 / 60 * scale
    try:
        with tempfile.TemporaryDirectory() as tmp:
            res = run_sync(sim, Path(tmp), "--max-rps", f"{allowed:.3f}", "--concurrency", "4")
            stats = sim.stats()
            floor = stats["requests"] / allowed
            record(
                "paced",
                {
                    "time_scale": scale,
                    "requests": stats["requests"],
                    "responses_429": stats["responses_429"],
                    "share_429": round(stats["responses_429"] / stats["requests"], 4),
                    "floor_s": round(floor, 3),
                    "wall_over_floor": round(res["wall_s"] / floor, 3),
                    **res,
                },
            )
    finally:
        sim.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="bench", required=True)
    p = sub.add_parser("requests")
    p.add_argument("--projects", type=int, default=25)
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--ops-per-day", type=int, default=300)
    for name, ops, days in (("cpu", [500_000], 60), ("rss", [200_000, 1_000_000, 2_000_000], 120)):
        p = sub.add_parser(name)
        p.add_argument("--ops", type=int, nargs="+", default=ops)
        p.add_argument("--projects", type=int, default=20)
        p.add_argument("--days", type=int, default=days)
        p.add_argument("--baseline-code", type=Path, default=None, help="the other checkout")
        p.add_argument("--runs", type=int, default=1, help="alternations per size")
        p.add_argument(
            "--bytecode", action="store_true", help="compile the checkouts first, as pip does"
        )
    p = sub.add_parser("paced")
    p.add_argument("--scale", type=float, default=10.0)
    p.add_argument("--projects", type=int, default=60)
    p.add_argument("--days", type=int, default=5)
    p.add_argument("--ops-per-day", type=int, default=400)
    args = parser.parse_args()
    {"requests": bench_requests, "cpu": bench_cpu, "rss": bench_cpu, "paced": bench_paced}[
        args.bench
    ](args)


if __name__ == "__main__":
    main()
