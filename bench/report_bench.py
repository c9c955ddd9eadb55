"""Time `opsaudit report` (the real CLI, in a subprocess) over a large generated dataset.

    python bench/gen_dataset.py /tmp/opsaudit-10m              # once: 10M operations, ~1 min
    python bench/report_bench.py /tmp/opsaudit-10m --runs 5

Target (PRODUCT.md): at most 3 s over 10M operations on 2 cores. Each run is a fresh process,
so the figure includes Python start-up, imports and view definitions, as a user sees it; the
first run also pays for reading the files into the page cache and is reported apart. Each run's
CPU (user + system, the child's rusage) is reported beside its wall time: on a shared box it is
the figure that noise does not move.

Before and after in one invocation: `--baseline OLD_DATA --baseline-code OLD_CHECKOUT` runs the
report of another checkout (`git archive COMMIT | tar -x -C OLD_CHECKOUT`, on PYTHONPATH) over
a dataset that checkout's gen_dataset wrote, alternating with this one's runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_report(data_dir: Path, extra: list[str], code: Path | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one `opsaudit report` run (of the checkout `code` if given);
    raises if it fails."""
    env = None
    program = _opsaudit()
    if code is not None:
        env = {**os.environ, "PYTHONPATH": str(code)}
        program = [sys.executable, "-m", "exporter"]
    cmd = [*program, "report", "--data-dir", str(data_dir), "--format", "json", *extra]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr}")
    return elapsed, _children_cpu() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a dataset written by bench/gen_dataset.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--since", default=None, help="also pass --since (e.g. 7d)")
    parser.add_argument("--json", type=Path, default=None, help="append the result here")
    parser.add_argument("--baseline", type=Path, default=None, help="the other code's dataset")
    parser.add_argument("--baseline-code", type=Path, default=None, help="the other checkout")
    args = parser.parse_args(argv)
    if (args.baseline is None) != (args.baseline_code is None):
        parser.error("--baseline and --baseline-code go together")
    extra = ["--since", args.since] if args.since else []
    warm_up, _ = time_report(args.data_dir, extra)
    runs, baseline = [], []
    for _ in range(args.runs):
        if args.baseline is not None:
            baseline.append(time_report(args.baseline, extra, args.baseline_code))
        runs.append(time_report(args.data_dir, extra))
    times = [wall for wall, _ in runs]
    result = {
        "data_dir": str(args.data_dir),
        "since": args.since,
        "cpus": os.cpu_count(),
        "first_run_s": round(warm_up, 3),
        "runs_s": [round(t, 3) for t in times],
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "median_cpu_s": round(statistics.median(cpu for _, cpu in runs), 3),
        "load_average": os.getloadavg()[0],
    }
    if baseline:
        result["baseline_median_s"] = round(statistics.median(w for w, _ in baseline), 3)
        result["baseline_median_cpu_s"] = round(statistics.median(c for _, c in baseline), 3)
        print(
            f"baseline {args.baseline_code} over {args.baseline}: median "
            f"{result['baseline_median_s']} s, CPU {result['baseline_median_cpu_s']} s; this "
            f"code: median {result['median_s']} s, CPU {result['median_cpu_s']} s (CPU ratio "
            f"{result['median_cpu_s'] / result['baseline_median_cpu_s']:.2f})"
        )
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
