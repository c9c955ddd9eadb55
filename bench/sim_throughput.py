"""Pages of 1000 operations the simulator serves per second over keep-alive (httpx).

    python bench/sim_throughput.py [--seconds 5] [--clients 1] [--ops 20000]

Rate limits and faults off. The first pass renders and caches each op's JSON; the timed loop
re-reads cached pages, the steady state a client benchmark sees after its first backfill.
"""

from __future__ import annotations

import argparse
import threading
import time

import httpx

from exporter.simulator import SimConfig, Simulator


def _loop(sim: Simulator, pid: str, cursors: list[str | None], stop: float, out: list[int]) -> None:
    n = 0
    with httpx.Client(
        base_url=sim.base_url, headers={"Authorization": f"Bearer {sim.personal_key}"}
    ) as client:
        while time.perf_counter() < stop:
            for cursor in cursors:
                params = {"limit": 1000} if cursor is None else {"limit": 1000, "cursor": cursor}
                r = client.get(f"/projects/{pid}/operations", params=params)
                assert r.status_code == 200 and len(r.content) > 100_000
                n += 1
    out.append(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--ops", type=int, default=20000, help="operations in the project walked")
    args = ap.parse_args()
    t0 = time.perf_counter()
    config = SimConfig(
        seed=1, projects=1, shared_projects=0, days=1, ops_per_project_per_day=args.ops
    )
    with Simulator(config) as sim:
        built = time.perf_counter() - t0
        pid = sim.project_ids()[0]
        cursors: list[str | None] = [None]
        with httpx.Client(
            base_url=sim.base_url, headers={"Authorization": f"Bearer {sim.personal_key}"}
        ) as client:
            t1 = time.perf_counter()
            while True:
                params = (
                    {"limit": 1000}
                    if cursors[-1] is None
                    else {"limit": 1000, "cursor": cursors[-1]}
                )
                body = client.get(f"/projects/{pid}/operations", params=params).json()
                if len(body["operations"]) < 1000:
                    break
                cursors.append(body["pagination"]["cursor"])
            cold = time.perf_counter() - t1
        counts: list[int] = []
        stop = time.perf_counter() + args.seconds
        threads = [
            threading.Thread(target=_loop, args=(sim, pid, cursors, stop, counts))
            for _ in range(args.clients)
        ]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
    pages = sum(counts)
    print(
        f"world: {sim.operation_count()} ops built in {built:.2f}s; first walk (render + cache): "
        f"{len(cursors)} pages in {cold:.2f}s"
    )
    print(
        f"{pages} pages of 1000 ops in {elapsed:.2f}s with {args.clients} client(s): "
        f"{pages / elapsed:.0f} pages/s"
    )


if __name__ == "__main__":
    main()
