"""Every benchmark in bench/README.md runs once, at a tiny size, so none can rot (issue 15).

The commands are the README's own: each is split into its `&&` parts, its size flags get tiny
values (and gen_dataset.py, whose defaults are 10M operations, gets tiny ones), the dataset path
becomes a temporary one, and it runs from a copy of bench/ so results land in that copy's
`bench/results/`, not in the repository's. The whole module takes well under a minute.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "bench" / "README.md").read_text()
# The rows of the table "| # | What | Command |": (number, command).
ROWS = re.findall(r"^\| (\S+) \| [^|]+ \| `(python bench/[^`]+)` \|$", README, re.MULTILINE)
# Tiny values for every size flag the README uses.
TINY = {
    "--projects": "2",
    "--days": "1",
    "--ops-per-day": "40",
    "--ops": "1500",
    "--scale": "60",
    "--runs": "1",
    "--seconds": "0.3",
    "--pages": "2",
}
# gen_dataset.py writes 10M operations by default: tiny ones here.
EXTRA = {"bench/gen_dataset.py": ["--operations", "3000", "--projects", "5", "--days", "2"]}
BIG_DATASET = "/tmp/opsaudit-10m"


def tiny(command: str, dataset: Path) -> list[list[str]]:
    """The README command as argv lists (one per `&&` part) at a tiny size."""
    runs = []
    for part in command.split("&&"):
        words = shlex.split(part.replace(BIG_DATASET, str(dataset)))
        assert words[:2][0] == "python", part
        argv: list[str] = [sys.executable, words[1]]
        size_flag = False  # skipping the README's value(s) of a size flag (--ops takes several)
        for word in words[2:]:
            if word.startswith("--"):
                size_flag = word in TINY
                argv += [word, TINY[word]] if size_flag else [word]
            elif not size_flag:
                argv.append(word)
        argv += EXTRA.get(words[1], [])
        runs.append(argv)
    return runs


def test_readme_lists_every_benchmark_script() -> None:
    scripts = {shlex.split(part)[1] for _, command in ROWS for part in command.split("&&")}
    on_disk = {f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py")}
    assert scripts == on_disk
    assert len(ROWS) == 14


@pytest.mark.parametrize(("number", "command"), ROWS, ids=[n for n, _ in ROWS])
def test_benchmark_runs_at_a_tiny_size(tmp_path: Path, number: str, command: str) -> None:
    work = tmp_path / "clone"
    shutil.copytree(ROOT / "bench", work / "bench", ignore=shutil.ignore_patterns("results"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSAUDIT_")}
    env.pop("NEON_API_KEY", None)
    for argv in tiny(command, tmp_path / "dataset"):
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
        assert done.stdout.strip(), argv
    if "sync_bench.py" in command:
        results = (work / "bench" / "results" / "sync.jsonl").read_text().splitlines()
        mode = shlex.split(command)[2]
        expected = {
            "requests": ["requests-backfill", "requests-incremental-no-change"],
            "cpu": ["cpu"],
            "rss": ["cpu"],
            "paced": ["paced"],
        }[mode]
        assert [json.loads(line)["bench"] for line in results] == expected
    if "cpu_profile.py" in command:
        results = (work / "bench" / "results" / "sync.jsonl").read_text().splitlines()
        profile = json.loads(results[-1])
        assert profile["bench"] == "cpu_profile"
        # The parts and the rest add up to the sync's CPU (exclusive times, none counted twice).
        parts = profile["parts_us_per_op"]
        assert sum(parts.values()) == pytest.approx(profile["sync_us_per_op"], abs=0.02)
        assert parts["Parquet writes (all rows written ahead)"] > 0
        assert parts["Arrow columns (versions_table)"] > 0
        assert parts["the rest (walk loop, queues, threads)"] >= 0


def test_cpu_alternates_a_baseline_checkout_with_this_one(tmp_path: Path) -> None:
    """`sync_bench.py cpu --baseline-code OLD --runs N`: OLD's sync, then this checkout's, N
    times per size against one simulator, each run from its own root (before and after under
    the same load)."""
    work = tmp_path / "clone"
    shutil.copytree(ROOT / "bench", work / "bench", ignore=shutil.ignore_patterns("results"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSAUDIT_")}
    env.pop("NEON_API_KEY", None)
    argv = [sys.executable, "bench/sync_bench.py", "cpu", "--ops", "1500", "--projects", "2"]
    argv += ["--days", "1", "--baseline-code", str(ROOT), "--runs", "2"]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["code"], r["root"]) for r in runs] == [
        ("baseline", str(ROOT)),
        ("this", str(work)),
    ] * 2
    assert len({r["ops"] for r in runs}) == 1 and runs[0]["ops"] > 0
