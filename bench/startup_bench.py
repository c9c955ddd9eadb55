"""Start-up of the console script (bench/README.md row 11): `opsaudit --help` and
`opsaudit query --data-dir D "select 1"`, wall and CPU (rusage of the child), median of N runs.

Several checkouts are timed in one invocation, alternating run by run (the load of a shared
machine hits each alike); each runs from its own root with PYTHONPATH set to it, so the console
script imports that checkout's code:

    python bench/startup_bench.py --runs 20 /tmp/base .

The dataset is `--data-dir D`, or else one this script makes with the last checkout
(`opsaudit demo --projects 3 --days 3`, in a temporary directory).

`--bytecode` compiles each checkout's `exporter/` first and lets Python read the .pyc files (a
pip install compiles them). Without it each checkout's `exporter/**/__pycache__` is removed and
PYTHONDONTWRITEBYTECODE=1 set, as on the shared development box: every run compiles each of
opsaudit's modules again (~15-25 ms).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(argv: list[str], root: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `argv` from `root`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode} in {root}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--bytecode", action="store_true")
    args = parser.parse_args()
    beside = Path(sys.executable).parent / "opsaudit"  # the virtualenv's console script
    script = str(beside) if beside.is_file() else shutil.which("opsaudit")
    if script is None:
        raise SystemExit("no opsaudit console script on PATH (activate the virtualenv)")
    roots = [c.resolve() for c in args.checkouts]
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        data_dir = args.data_dir
        if data_dir is None:
            data_dir = Path(tmp) / "data"
            demo = [script, "demo", "--projects", "3", "--days", "3", "--data-dir", str(data_dir)]
            env = {**os.environ, "PYTHONPATH": str(roots[-1])}
            subprocess.run(demo, cwd=roots[-1], env=env, check=True, capture_output=True)
        _measure(script, roots, data_dir.resolve(), args)
    return 0


def _measure(script: str, roots: list[Path], data_dir: Path, args: argparse.Namespace) -> None:
    commands = {
        "--help": [script, "--help"],
        "query select 1": [script, "query", "--data-dir", str(data_dir), "select 1"],
    }
    envs = {}
    for root in roots:
        env = {**os.environ, "PYTHONPATH": str(root)}
        if args.bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            compileall.compile_dir(root / "exporter", quiet=1)
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            for cache in list((root / "exporter").rglob("__pycache__")):
                shutil.rmtree(cache)
        envs[root] = env
    times: dict[tuple[str, Path], list[tuple[float, float]]] = {}
    for i in range(args.warmup + args.runs):
        for name, argv in commands.items():
            for root in roots:
                measured = _run(argv, root, envs[root])
                if i >= args.warmup:
                    times.setdefault((name, root), []).append(measured)
    bytecode = "compiled" if args.bytecode else "not written"
    load = os.getloadavg()[0]
    print(f"medians of {args.runs} runs (ms), load {load:.2f}, bytecode {bytecode}")
    for (name, root), runs in times.items():
        wall = statistics.median(w for w, _ in runs) * 1000
        cpu = statistics.median(c for _, c in runs) * 1000
        print(f"{name:16s} {root!s:40s} wall {wall:6.1f}  cpu {cpu:6.1f}")


if __name__ == "__main__":
    sys.exit(main())
