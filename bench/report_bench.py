"""Time `opsaudit report` (the real CLI, in a subprocess) over a large generated dataset.

    python bench/gen_dataset.py /tmp/opsaudit-10m              # once: 10M operations, ~1 min
    python bench/report_bench.py /tmp/opsaudit-10m --runs 5

Targets (issue 24; PRODUCT.md): `opsaudit report` over 10M operations on 2 cores, 0.75 s warm,
1.5 s cold; the default format (a terminal's tables) unless `--format json`. Each run is a fresh process, so the figure includes Python start-up, imports and
view definitions, as a user sees it; the first run also pays for reading the files into the
page cache and is reported apart. `--cold` drops the page cache before every run instead (root:
`sync; echo 3 > /proc/sys/vm/drop_caches`). Each run's CPU (user + system) and peak RSS (the
child's own rusage, `wait4`) are reported beside its wall time: on a shared box CPU is the
figure that noise does not move.

Before and after in one invocation: `--baseline OLD_DATA --baseline-code OLD_CHECKOUT` runs the
report of another checkout (`git archive COMMIT | tar -x -C OLD_CHECKOUT`, on PYTHONPATH, from
its own root) over a dataset (the same one, or one that checkout's gen_dataset wrote),
alternating with this one's runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Issue 24: over 10M operations on 2 cores, as a user runs it (a fresh process each time).
TARGET_WARM_S = 0.75
TARGET_COLD_S = 1.5


def _opsaudit() -> list[str]:
    exe = shutil.which("opsaudit", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "exporter"]


def drop_page_cache() -> None:
    """Cold runs: the kernel forgets every cached file page (root only; raises otherwise)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def time_report(
    data_dir: Path, extra: list[str], code: Path | None = None, *, cold: bool = False
) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one `opsaudit report` run (of the checkout `code` if
    given, run from its root: `python -m` puts the working directory first on sys.path);
    raises if it fails. `cold`: the page cache is dropped first."""
    env = None
    program = _opsaudit()
    if code is not None:
        env = {**os.environ, "PYTHONPATH": str(code)}
        program = [sys.executable, "-m", "exporter"]
    cmd = [*program, "report", "--data-dir", str(data_dir), *extra]
    if cold:
        drop_page_cache()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=code)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - started
        if child.returncode != 0:
            err.seek(0)
            message = err.read().decode(errors="replace")
            raise RuntimeError(f"{' '.join(cmd)} failed ({child.returncode}): {message}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _summary(runs: list[tuple[float, float, float]]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(w for w, _, _ in runs), 3),
        "min_s": round(min(w for w, _, _ in runs), 3),
        "median_cpu_s": round(statistics.median(c for _, c, _ in runs), 3),
        "max_rss_mib": round(max(r for _, _, r in runs), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a dataset written by bench/gen_dataset.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--since", default=None, help="also pass --since (e.g. 7d)")
    parser.add_argument(
        "--format",
        default="table",
        help="the report's --format: table (the default, as `opsaudit report` runs) or json "
        "(every row of the failing and stuck lists: 79 MB at 10M; the figures before 2026-11-25 "
        "09:30 UTC)",
    )
    parser.add_argument("--json", type=Path, default=None, help="append the result here")
    parser.add_argument("--baseline", type=Path, default=None, help="the other code's dataset")
    parser.add_argument("--baseline-code", type=Path, default=None, help="the other checkout")
    parser.add_argument(
        "--cold", action="store_true", help="drop the page cache before every run (root only)"
    )
    args = parser.parse_args(argv)
    if (args.baseline is None) != (args.baseline_code is None):
        parser.error("--baseline and --baseline-code go together")
    extra = ["--format", args.format, *(["--since", args.since] if args.since else [])]
    # Warm runs after one that reads the files into the page cache; cold ones drop it each time.
    warm_up = None if args.cold else time_report(args.data_dir, extra)[0]
    runs: list[tuple[float, float, float]] = []
    baseline: list[tuple[float, float, float]] = []
    for _ in range(args.runs):
        if args.baseline is not None:
            baseline.append(time_report(args.baseline, extra, args.baseline_code, cold=args.cold))
        runs.append(time_report(args.data_dir, extra, cold=args.cold))
    target = TARGET_COLD_S if args.cold else TARGET_WARM_S
    result = {
        "data_dir": str(args.data_dir),
        "since": args.since,
        "format": args.format,
        "cold": args.cold,
        "cpus": os.cpu_count(),
        "first_run_s": None if warm_up is None else round(warm_up, 3),
        "runs_s": [round(w, 3) for w, _, _ in runs],
        "runs_cpu_s": [round(c, 3) for _, c, _ in runs],
        **_summary(runs),
        "load_average": os.getloadavg()[0],
    }
    if baseline:
        result["baseline"] = {
            "runs_s": [round(w, 3) for w, _, _ in baseline],
            "runs_cpu_s": [round(c, 3) for _, c, _ in baseline],
            **_summary(baseline),
        }
        base = result["baseline"]
        print(
            f"baseline {args.baseline_code} over {args.baseline}: median {base['median_s']} s, "
            f"CPU {base['median_cpu_s']} s, peak {base['max_rss_mib']} MiB; this code: median "
            f"{result['median_s']} s, CPU {result['median_cpu_s']} s, peak "
            f"{result['max_rss_mib']} MiB (CPU ratio "
            f"{result['median_cpu_s'] / base['median_cpu_s']:.2f})"
        )
    verdict = "ok" if result["median_s"] <= target else "OVER TARGET"
    print(
        f"opsaudit report over {args.data_dir} ({'cold' if args.cold else 'warm'}): median "
        f"{result['median_s']} s, min {result['min_s']} s, CPU {result['median_cpu_s']} s"
        + ("" if warm_up is None else f", first run {warm_up:.3f} s")
        + f" ({args.runs} runs, target {target} s: {verdict}; 1-min load "
        f"{result['load_average']:.1f})"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        with args.json.open("a") as fh:
            fh.write(json.dumps(result) + "\n")
    return 0  # a measurement, not a check: the verdict is printed (a tiny run is noise)


if __name__ == "__main__":
    sys.exit(main())
