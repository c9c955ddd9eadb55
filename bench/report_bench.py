"""Time `opsaudit report` (the real CLI, in a subprocess) over a large generated dataset.

    python bench/gen_dataset.py /tmp/opsaudit-10m              # once: 10M operations, ~1 min
    python bench/report_bench.py /tmp/opsaudit-10m --runs 5

Target (PRODUCT.md): at most 3 s over 10M operations on 2 cores. Each run is a fresh process,
so the figure includes Python start-up, imports and view definitions, as a user sees it; the
first run also pays for reading the files into the page cache and is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 3.0


def _opsaudit() -> list[str]:
    exe = shutil.which("opsaudit", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "exporter"]


def time_report(data_dir: Path, extra: list[str]) -> float:
    """Wall seconds of one `opsaudit report` run; raises if it fails."""
    cmd = [*_opsaudit(), "report", "--data-dir", str(data_dir), "--format", "json", *extra]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a dataset written by bench/gen_dataset.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--since", default=None, help="also pass --since (e.g. 7d)")
    parser.add_argument("--json", type=Path, default=None, help="append the result here")
    args = parser.parse_args(argv)
    extra = ["--since", args.since] if args.since else []
    warm_up = time_report(args.data_dir, extra)
    times = [time_report(args.data_dir, extra) for _ in range(args.runs)]
    result = {
        "data_dir": str(args.data_dir),
        "since": args.since,
        "cpus": os.cpu_count(),
        "first_run_s": round(warm_up, 3),
        "runs_s": [round(t, 3) for t in times],
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "load_average": os.getloadavg()[0],
    }
    verdict = "ok" if result["median_s"] <= TARGET_S else "OVER TARGET"
    print(
        f"opsaudit report over {args.data_dir}: median {result['median_s']} s, "
        f"min {result['min_s']} s, first run {result['first_run_s']} s "
        f"({args.runs} runs, target {TARGET_S} s: {verdict}; 1-min load {result['load_average']:.1f})"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        with args.json.open("a") as fh:
            fh.write(json.dumps(result) + "\n")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
