"""A cron run costs what is new (issue 25): a simulated day of runs every 5 minutes.

The simulator and the syncs run in this process, the syncs on the simulator's clock
(`SyncConfig.clock`), so a day of cron takes a minute or two. The world has a few percent of its
operations open all through its history (old `failed` / `error` ones), spread through every page
of every project. Requests are counted at the simulator.

    python bench/schedule_bench.py --projects 8 --days 30 --ops-per-day 700 --runs 288

Prints one JSON object and appends it to bench/results/schedule.jsonl:

- `strict_no_change`: one no-change run with `--refresh-open-every 0` (today's guarantee: every
  open operation in every run) on a copy of the dataset: what each of 288 runs used to cost;
- per run of the day (default policy, `--refresh-open-every 24h`), its floor (PRODUCT.md, a
  cron run costs what is new): the listing, one page per project, and one request per hot or
  due-by-its-quarter-rule operation not on a first page. Operations held only by the 24 h bound
  are the daily re-walk, counted once for the whole day as one full re-walk of the history;
- `between`: runs that re-read no cold operation below a first page (between cold re-reads:
  the due ones, and those the project's slot brought forward): max and median of
  requests / floor (target <= 1.05);
- `day`: total requests / (sum of the floors + one full re-walk) (target <= 1.1); the same
  without the quarter-rule re-reads in the floors (`ratio_vs_quiet_floors`: 288 x the floor of
  a run with nothing due but hot operations, + one full re-walk, the stricter reading of the
  target); and against 288 strict runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exporter.api.client import RetryPolicy  # noqa: E402
from exporter.engine.sync import SyncConfig, sync  # noqa: E402
from exporter.simulator import SimConfig, Simulator  # noqa: E402

RESULTS = ROOT / "bench" / "results"
US = 1_000_000
HOUR = 3600 * US
PAGE = 1000
REFRESH_ROUTES = (
    "GET /projects/{project_id}/operations",
    "GET /projects/{project_id}/operations/{operation_id}",
)


def _sync(sim: Simulator, data_dir: Path, every: float) -> dict[str, Any]:
    sim.reset_stats()
    summary = sync(
        SyncConfig(
            data_dir=data_dir,
            api_key=sim.personal_key,
            base_url=sim.base_url,
            max_rps=None,
            retry=RetryPolicy(max_attempts=5, backoff_initial=0.01, backoff_max=0.05),
            refresh_open_every=every,
            clock=lambda: int(sim.world.clock_us),
            compact=False,
        )
    )
    if summary.outcome != "ok":
        raise SystemExit(f"sync {summary.outcome}: {summary.error} {summary.errors}")
    by_route: dict[str, int] = sim.stats()["by_route"]
    return {
        "requests": sum(by_route.values()),
        "listing": sum(n for r, n in by_route.items() if r not in REFRESH_ROUTES),
        "open": summary.open_operations,
    }


def _open_ops(data_dir: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return con.execute(
            "SELECT id, project_id, created_us, status, checked_us, changed_us, retry_us, misses "
            "FROM open_ops"
        ).fetchall()
    finally:
        con.close()


def _classify(row: tuple[Any, ...], now: int, bound: int) -> str:
    """PRODUCT.md's rule for one tracked operation: hot, quarter (due by its quarter rule),
    daily (held only by the bound: part of the daily re-walk) or waiting."""
    _, _, created, status, checked, changed, retry, misses = row
    if status in ("finished", "cancelled", "skipped") or changed is None or misses:
        return "hot"
    if now - max(created, changed) < HOUR or (retry is not None and checked < retry <= now):
        return "hot"
    interval = (checked - changed) / 4
    if interval >= bound:
        return "daily"
    return "quarter" if now >= checked + interval else "waiting"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=8)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--ops-per-day", type=int, default=700)
    parser.add_argument("--runs", type=int, default=288)
    parser.add_argument("--every", type=float, default=300, help="seconds between runs")
    parser.add_argument("--bound", type=float, default=86_400, help="--refresh-open-every")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    bound = int(args.bound * US)

    sim = Simulator(
        SimConfig(
            seed=args.seed,
            projects=args.projects,
            shared_projects=0,
            orgs=1,
            days=args.days,
            ops_per_project_per_day=args.ops_per_day,
            live_ops_per_project_per_hour=0,
        )
    ).start()
    tmp = Path(tempfile.mkdtemp(prefix="opsaudit-schedule-bench-"))
    try:
        data = tmp / "data"
        started = time.monotonic()
        backfill = _sync(sim, data, args.bound)
        # Each operation's page (newest first), for "not on a first page".
        page_of: dict[str, int] = {}
        pages: dict[str, int] = {}
        with sim.world.lock:
            for pid in sim.project_ids():
                p = sim.world.live_project(pid)
                assert p is not None
                n = len(p.ids)
                pages[pid] = math.ceil((n + 1) / PAGE)
                for i, op_id in enumerate(p.ids):
                    page_of[op_id] = (n - 1 - i) // PAGE + 1
        total_ops = len(page_of)
        rows = _open_ops(data)
        open_now = [r for r in rows if r[3] not in ("finished", "cancelled", "skipped")]
        deepest = {pid: 0 for pid in pages}
        for r in open_now:
            deepest[r[1]] = max(deepest[r[1]], page_of.get(r[0], 1))
        # Today's guarantee on a copy: every open operation re-read by a no-change run.
        strict_dir = tmp / "strict"
        shutil.copytree(data, strict_dir)
        sim.advance(args.every)
        strict = _sync(sim, strict_dir, 0)
        shutil.rmtree(strict_dir)

        runs: list[dict[str, Any]] = []
        for _ in range(args.runs):
            sim.advance(args.every)
            now = int(sim.world.clock_us)
            before = _open_ops(data)
            kinds = {r[0]: _classify(r, now, bound) for r in before}
            deep = {k: 0 for k in ("hot", "quarter")}
            for op_id, kind in kinds.items():
                if kind in deep and page_of.get(op_id, 1) > 1:
                    deep[kind] += 1
            result = _sync(sim, data, args.bound)
            after = {r[0]: r[4] for r in _open_ops(data)}
            # Cold re-reads that cost something: not hot, below the first page, read by this run
            # (due, or brought forward to the project's slot).
            cold_read = sum(
                1
                for i, k in kinds.items()
                if k != "hot" and page_of.get(i, 1) > 1 and after.get(i) == now
            )
            quiet = result["listing"] + len(pages) + deep["hot"]
            floor = quiet + deep["quarter"]
            runs.append({**result, "floor": floor, "quiet": quiet, "cold_read": cold_read, **deep})
        elapsed = time.monotonic() - started

        between = [r["requests"] / r["floor"] for r in runs if not r["cold_read"]]
        total = sum(r["requests"] for r in runs)
        rewalk = sum(pages.values())
        day_floor = sum(r["floor"] for r in runs) + rewalk
        result = {
            "bench": "schedule-day",
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": f"{platform.machine()} {os.cpu_count()} cores, "
            f"python {platform.python_version()}",
            "args": vars(args),
            "world": {
                "projects": len(pages),
                "operations": total_ops,
                "open": len(open_now),
                "open_share": round(len(open_now) / total_ops, 4),
                "pages_per_project": sorted(set(pages.values())),
                "deepest_open_page": sorted(set(deepest.values())),
            },
            "backfill_requests": backfill["requests"],
            "strict_no_change": strict["requests"],
            "between": {
                "runs": len(between),
                "max_ratio": round(max(between), 4) if between else None,
                "median_ratio": round(statistics.median(between), 4) if between else None,
                "typical_requests": statistics.median(
                    [r["requests"] for r in runs if not r["cold_read"]] or [0]
                ),
            },
            "day": {
                "runs": len(runs),
                "requests": total,
                "floor": day_floor,
                "full_rewalk": rewalk,
                "ratio": round(total / day_floor, 4),
                "quarter_due_deep": sum(r["quarter"] for r in runs),
                "ratio_vs_quiet_floors": round(total / (sum(r["quiet"] for r in runs) + rewalk), 4),
                "strict_day": strict["requests"] * len(runs),
                "vs_strict": round(total / (strict["requests"] * len(runs)), 4),
                "runs_with_cold_reads": sum(1 for r in runs if r["cold_read"]),
                "max_run": max(r["requests"] for r in runs),
            },
            "seconds": round(elapsed, 1),
        }
        print(json.dumps(result))
        RESULTS.mkdir(parents=True, exist_ok=True)
        with open(RESULTS / "schedule.jsonl", "a") as fh:
            fh.write(json.dumps(result) + "\n")
    finally:
        sim.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
