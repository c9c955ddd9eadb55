"""Peak memory, CPU and time to the first row of `opsaudit query 'select * from
operation_versions'` (the real CLI, in a subprocess) over a generated dataset.

    python bench/query_bench.py --ops 3000000 --runs 1
    python bench/query_bench.py --data-dir /tmp/opsaudit-10m --formats jsonl csv json

Without `--data-dir`, a dataset of `--ops` operations is written first by bench/gen_dataset.py
(into a temporary directory, deleted after). Each run is a fresh process whose stdout is a pipe
this script reads and throws away: the time to its first byte is what a user piping the rows
sees first; peak RSS and CPU (user + system) are the child's own rusage (`wait4`).

Before and after in one invocation: `--baseline-code OLD_CHECKOUT` (`git archive COMMIT | tar -x
-C OLD_CHECKOUT`) runs that checkout's query (on PYTHONPATH, from its own root), alternating
with this one's. The whole result of an old checkout is held in memory: GBs at 3M rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SQL = "select * from operation_versions"


def _opsaudit() -> list[str]:
    exe = shutil.which("opsaudit", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "exporter"]


def run_query(data_dir: Path, fmt: str, code: Path | None = None) -> dict[str, float]:
    """One `opsaudit query --format FMT` run: wall, time to the first byte, CPU, peak RSS,
    bytes written; raises if it fails."""
    env, program = None, _opsaudit()
    if code is not None:
        env = {**os.environ, "PYTHONPATH": str(code)}
        program = [sys.executable, "-m", "exporter"]
    cmd = [*program, "query", "--data-dir", str(data_dir), "--format", fmt, SQL]
    started = time.perf_counter()
    first = None
    size = 0
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=code)
        assert child.stdout is not None
        while chunk := child.stdout.read1(1 << 20):
            first = time.perf_counter() if first is None else first
            size += len(chunk)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        code_ = os.waitstatus_to_exitcode(status)
        if code_ != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed ({code_}): {err.read().decode()[-2000:]}")
    return {
        "wall_s": round(wall, 3),
        "first_byte_s": round((first or time.perf_counter()) - started, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "sys_s": round(usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "bytes": size,
    }


def _generate(out: Path, ops: int) -> None:
    gen = Path(__file__).resolve().parent / "gen_dataset.py"
    args = ["--operations", str(ops), "--projects", str(max(1, min(5000, ops // 500)))]
    days = max(1, min(180, ops // 5000))
    subprocess.run([sys.executable, str(gen), str(out), *args, "--days", str(days)], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="an existing dataset")
    parser.add_argument("--ops", type=int, default=3_000_000, help="operations to generate")
    parser.add_argument("--formats", nargs="+", default=["jsonl"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline-code", type=Path, default=None, help="the other checkout")
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).parent / "results" / "query.jsonl"
    )
    args = parser.parse_args(argv)
    scratch = None
    data_dir = args.data_dir
    if data_dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="opsaudit-query-bench-"))
        data_dir = scratch / "data"
        _generate(data_dir, args.ops)
    try:
        for _ in range(args.runs):
            for fmt in args.formats:
                codes = [("baseline", args.baseline_code)] if args.baseline_code else []
                for name, code in [*codes, ("this", None)]:
                    result = {"bench": "query", "code": name, "format": fmt, "sql": SQL}
                    result |= run_query(data_dir, fmt, code)
                    result["load_average"] = os.getloadavg()[0]
                    print(json.dumps(result))
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    with args.json.open("a") as fh:
                        fh.write(json.dumps(result) + "\n")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
