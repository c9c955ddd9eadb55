"""Where a backfill's client CPU goes, per part of the pipeline (issue 24: "the profile that
explains what is left").

    python bench/cpu_profile.py --ops 1000000 --projects 20 --days 120 [--concurrency 4]

The simulator runs in its own process (`sync_bench.SimProcess`); the sync runs in this one, as
`exporter.engine.sync.sync` (no CLI), with the functions below wrapped to add the CPU time of
the thread that runs them (`time.thread_time`: a thread waiting for the GIL or a lock spends
none). Time is exclusive: a part called inside another (the summary's Parquet writes inside the
summary) counts in the inner one only, so the parts and "the rest" add up to the sync's CPU.
A sampling profiler (py-spy) shows the same parts but counts a thread waiting for the GIL as
busy; this one does not.

The figures are per exported version, with the interpreter's imports and the views child (a
subprocess, from RUSAGE_CHILDREN) apart, and are printed as a table and appended as one JSON
object to bench/results/sync.jsonl ("cpu_profile").
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sync_bench import SimProcess, record


def _parts() -> list[tuple[str, Any, str]]:
    """(label, owner, attribute) of each timed part, looked up where the caller finds it."""
    from exporter.api.client import ApiClient
    from exporter.engine import sync, walk
    from exporter.store.local import dataset, spill
    from exporter.store.state import StateDB

    return [
        ("page: HTTP and decode (msgspec)", ApiClient, "list_operations"),
        ("page: created_at parsed", walk, "created_micros"),
        ("walk: classification", walk.ProjectWalk, "_take_page"),
        ("Arrow columns (versions_table)", sync, "versions_table"),
        ("Parquet writes (all rows written ahead)", spill.Spill, "_flush"),
        ("summary record", dataset.Dataset, "_spill_summary"),
        ("flagged record", dataset, "flagged_record"),
        ("superseded record", dataset, "superseded_record"),
        ("commits (files, fsync, state)", dataset.Dataset, "commit"),
        ("state changes (apply_chunk)", StateDB, "apply_chunk"),
        ("compaction", dataset.Dataset, "compact"),
        ("end of run (record, exports)", sync._Run, "_finish"),
    ]


class Timer:
    """Exclusive thread CPU per label: a call's time less that of the timed calls inside it."""

    def __init__(self) -> None:
        self.cpu: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # the inner timed calls' time, subtracted from this one's
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                inner = stack.pop()
                if stack:
                    stack[-1] += spent
                with self._lock:
                    self.cpu[label] += spent - inner
                    self.calls[label] += 1

        return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    per_day = max(1, args.ops // (args.projects * args.days))
    sim = SimProcess(
        {
            "seed": 2,
            "projects": args.projects,
            "days": args.days,
            "ops_per_project_per_day": per_day,
        }
    )
    try:
        started = time.process_time()
        from exporter.engine.sync import SyncConfig, sync

        imports = time.process_time() - started
        timer = Timer()
        for label, owner, name in _parts():
            setattr(owner, name, timer.wrap(label, getattr(owner, name)))
        with tempfile.TemporaryDirectory() as tmp:
            config = SyncConfig(
                data_dir=tmp,
                api_key=sim.info["key"],
                base_url=sim.info["base_url"],
                max_rps=0,
                concurrency=args.concurrency,
                map_large_allocations=True,  # as `opsaudit sync`'s: this process is the run's
            )
            before, wall = time.process_time(), time.perf_counter()
            summary = sync(config)
            cpu, wall = time.process_time() - before, time.perf_counter() - wall
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the views child; not the sim
            child = usage.ru_utime + usage.ru_stime
    finally:
        sim.close()
    n = summary.versions_written
    rest = cpu - sum(timer.cpu.values())
    rows = [(label, timer.cpu[label], timer.calls[label]) for label, _, _ in _parts()]
    rows += [("the rest (walk loop, queues, threads)", rest, 0)]
    print(f"{n:,} versions, {wall:.2f} s wall, load {os.getloadavg()[0]:.2f}")
    print(f"{'part':42s} {'CPU s':>7s} {'us/op':>6s} {'calls':>6s}")
    for label, spent, calls in sorted(rows, key=lambda r: -r[1]):
        print(f"{label:42s} {spent:7.3f} {spent / n * 1e6:6.2f} {calls:6d}")
    print(f"{'sync, in this process':42s} {cpu:7.3f} {cpu / n * 1e6:6.2f}")
    print(f"{'imports (exporter.engine.sync)':42s} {imports:7.3f} {imports / n * 1e6:6.2f}")
    print(f"{'views child (subprocess)':42s} {child:7.3f} {child / n * 1e6:6.2f}")
    total = cpu + imports + child
    print(f"{'all':42s} {total:7.3f} {total / n * 1e6:6.2f}")
    record(
        "cpu_profile",
        {
            "ops": n,
            "concurrency": args.concurrency,
            "wall_s": round(wall, 3),
            "cpu_us_per_op": round(total / n * 1e6, 2),
            "sync_us_per_op": round(cpu / n * 1e6, 3),
            "parts_us_per_op": {label: round(spent / n * 1e6, 3) for label, spent, _ in rows},
            "imports_s": round(imports, 3),
            "views_child_s": round(child, 3),
            "load": round(os.getloadavg()[0], 2),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
