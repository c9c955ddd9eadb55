"""Large accounts (issue 12): a 10,000-project account under the real limits, time-scaled.

The simulator enforces 700 requests/min per account and 40/s per route, both sped up by
`--scale` (20: the "minute" lasts 3 s), so a pass that takes 14 minutes for real takes 43 s.
Four scenarios (`--scenarios`, all by default), one JSON line each (also appended to
bench/results/sync.jsonl):

- `backfill`: the first sync of every project under the limits (without it, unlimited set-up):
  requests against the minimum, which counts each project's two names listings (PRODUCT.md).
- `full`: a no-change pass over every project at the full account rate: wall time against the
  floor (requests / allowed rate), share of 429s, requests against PRODUCT.md's minimum (no
  names listing: within --names-max-age), CPU and peak RSS of the sync process.
- `budget`: three runs, each with a time budget of a third of the floor: how many projects each
  walked, and whether every project was walked exactly once between them.
- `console`: another client spends 30 % of the account limit (the web console) while opsaudit
  syncs at its default share: opsaudit's 429 share and achieved rate.

    python bench/scale_bench.py --projects 10000 --scale 20
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_bench import SimProcess, record, run_sync

ACCOUNT_PER_MINUTE = 700
DEFAULT_SHARE_RPS = 8.0  # opsaudit's default --max-rps (about two thirds of 700/min)


def _limits(sim: SimProcess, scale: float, enabled: bool = True) -> None:
    base = sim.info["base_url"].rsplit("/api/v2", 1)[0]
    httpx.post(
        f"{base}/_sim/rate-limits",
        json={
            "enabled": enabled,
            "per_minute": ACCOUNT_PER_MINUTE,
            "per_route_per_second": 40,
            "retry_after": True,
            "time_scale": scale,
        },
    ).raise_for_status()


def _synced(data_dir: Path) -> dict[str, int | None]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return dict(con.execute("SELECT id, last_synced_us FROM projects").fetchall())
    finally:
        con.close()


NAMES_ROUTES = ("GET /projects/{project_id}/branches", "GET /projects/{project_id}/endpoints")


def _minimum(sim: SimProcess, *, names: bool = False) -> int:
    """PRODUCT.md's minimum: one page per project (a backfill of fewer than 1,000 operations
    each, as here, or a no-change pass) plus the listing; with `names` (a backfill: every
    project's first walk) also its two names listings (one page of branches: under 10,000)."""
    info = sim.info
    listing = 1 + sum(math.ceil((n + 1) / 400) for n in info["org_projects"])
    listing += math.ceil((info["projects"] - sum(info["org_projects"]) + 1) / 400)
    return info["projects"] * (3 if names else 1) + listing


def _names_requests(stats: dict[str, Any]) -> int:
    return sum(stats["by_route"].get(route, 0) for route in NAMES_ROUTES)


def _console(sim: SimProcess, rps: float, stop: threading.Event, counts: dict[str, int]) -> None:
    """The web console: steady requests of the same account at `rps`."""
    with httpx.Client(
        base_url=sim.info["base_url"], headers={"Authorization": f"Bearer {sim.info['key']}"}
    ) as client:
        next_at = time.monotonic()
        while not stop.is_set():
            next_at += 1 / rps
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            status = client.get("users/me/organizations").status_code
            counts["requests"] += 1
            counts["429"] += status == 429


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--projects", type=int, default=10_000)
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--ops-per-project", type=int, default=5)
    parser.add_argument(
        "--scenarios",
        default="backfill,full,budget,console",
        help="comma-separated subset (default: all); `full` needs `backfill`'s data",
    )
    args = parser.parse_args()
    scenarios = set(args.scenarios.split(","))
    scale = args.scale
    allowed = ACCOUNT_PER_MINUTE / 60 * scale
    sim = SimProcess(
        {
            "seed": 12,
            "projects": args.projects,
            "shared_projects": 0,
            "orgs": 1,
            "days": 1,
            "ops_per_project_per_day": args.ops_per_project,
        }
    )
    conc = ("--concurrency", str(args.concurrency), "--route-max-rps", f"{40 * scale:g}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            if "backfill" in scenarios:
                # The backfill under the real limits: a page and the two names listings of
                # every project (their first walk), against the minimum that counts them.
                _limits(sim, scale)
                sim.reset()
                back = run_sync(sim, data, "--max-rps", f"{allowed:.3f}", *conc)
                stats = sim.stats()
                floor = stats["requests"] / allowed
                minimum = _minimum(sim, names=True)
                record(
                    "scale-backfill",
                    {
                        "projects": sim.info["projects"],
                        "time_scale": scale,
                        "requests": stats["requests"],
                        "names_requests": _names_requests(stats),
                        "minimum": minimum,
                        "requests_over_minimum": round(stats["requests"] / minimum, 4),
                        "floor_s": round(floor, 2),
                        "wall_over_floor": round(back["wall_s"] / floor, 3),
                        "share_429": round(stats["responses_429"] / stats["requests"], 4),
                        **back,
                    },
                )
            else:
                run_sync(sim, data, "--max-rps", "0", *conc)  # set-up: the backfill, unlimited
                _limits(sim, scale)
            if not scenarios & {"full", "budget", "console"}:
                return

            sim.reset()
            full = run_sync(sim, data, "--max-rps", f"{allowed:.3f}", *conc)
            stats = sim.stats()
            floor = stats["requests"] / allowed
            minimum = _minimum(sim)
            record(
                "scale-full",
                {
                    "projects": sim.info["projects"],
                    "time_scale": scale,
                    "requests": stats["requests"],
                    "names_requests": _names_requests(stats),
                    "minimum": minimum,
                    "requests_over_minimum": round(stats["requests"] / minimum, 4),
                    "floor_s": round(floor, 2),
                    "wall_over_floor": round(full["wall_s"] / floor, 3),
                    "share_429": round(stats["responses_429"] / stats["requests"], 4),
                    "cpu_ms_per_project": round(full["cpu_s"] / sim.info["projects"] * 1e3, 3),
                    **full,
                },
            )

            if "budget" not in scenarios and "console" not in scenarios:
                return
            budget_s = floor / 3
            before = _synced(data)
            walked_counts: dict[str, int] = {}
            runs = []
            for _ in range(3):
                sim.reset()
                res = run_sync(
                    sim,
                    data,
                    "--max-rps",
                    f"{allowed:.3f}",
                    "--time-budget",
                    f"{max(1, round(budget_s))}s",
                    *conc,
                )
                after = _synced(data)
                walked = [p for p in after if after[p] != before.get(p)]
                for p in walked:
                    walked_counts[p] = walked_counts.get(p, 0) + 1
                before = after
                s = res["summary"]
                runs.append(
                    {
                        "walked": len(walked),
                        "outcome": s["outcome"],
                        "projects_left": s["projects_left"],
                        "coverage_hour": s["coverage"]["within_hour"] / s["coverage"]["projects"],
                        "wall_s": res["wall_s"],
                    }
                )
            record(
                "scale-budget-thirds",
                {
                    "projects": sim.info["projects"],
                    "budget_s": round(budget_s, 2),
                    "runs": runs,
                    "every_project_walked": len(walked_counts) == sim.info["projects"],
                    "walked_more_than_once": sum(1 for n in walked_counts.values() if n > 1),
                },
            )

            stop = threading.Event()
            counts = {"requests": 0, "429": 0}
            console = threading.Thread(
                target=_console, args=(sim, 0.3 * allowed, stop, counts), daemon=True
            )
            sim.reset()
            console.start()
            shared = run_sync(sim, data, "--max-rps", f"{DEFAULT_SHARE_RPS * scale:.3f}", *conc)
            stop.set()
            console.join(5)
            s = shared["summary"]
            record(
                "scale-console-30pct",
                {
                    "projects": sim.info["projects"],
                    "opsaudit_requests": s["requests"],
                    "opsaudit_429": s["responses_429"],
                    "opsaudit_share_429": round(s["responses_429"] / max(1, s["requests"]), 4),
                    "opsaudit_achieved_rps_unscaled": round(s["achieved_rps"] / scale, 2),
                    "opsaudit_configured_rps_unscaled": DEFAULT_SHARE_RPS,
                    "console_requests": counts["requests"],
                    "console_429": counts["429"],
                    "wall_s": shared["wall_s"],
                    "max_rss_mb": shared["max_rss_mb"],
                },
            )
    finally:
        sim.close()


if __name__ == "__main__":
    main()
