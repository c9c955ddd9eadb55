"""Run the README's two set-up commands verbatim, each in a fresh copy of the repository.

A newcomer copies them from the README into a shell at the root of a fresh clone; this does the
same: it copies the repository's files (tracked, plus new ones not ignored: what a clone of this
commit would hold) to a new temporary directory, strips any active virtual environment from the
environment, and runs each line with `bash -c` there. `.ci/run` calls it, so CI proves that both
lines work on a fresh machine exactly as written.

    python scripts/check_setup_commands.py            # both commands
    python scripts/check_setup_commands.py --only 1   # just the first (install + demo)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- setup:begin"
END = "<!-- setup:end -->"

# What each command must print besides exiting 0: the demo's closing hint, pytest's tally.
EXPECTED = ("Next, try:", " passed")


def setup_commands(readme: str) -> list[str]:
    """The command lines of the README's set-up block, in order."""
    start = readme.index(BEGIN)
    block = readme[start : readme.index(END, start)]
    lines = block.splitlines()[1:]  # drop the marker line
    return [line for line in lines if line.strip() and not line.startswith("```")]


def repository_files() -> list[str]:
    """What a clone would hold: tracked files plus new, not-ignored ones (minus deleted ones)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def fresh_copy(dest: Path) -> None:
    for name in repository_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def clean_env() -> dict[str, str]:
    """This environment without an active virtualenv: `python3` must be the machine's own."""
    env = dict(os.environ)
    venv = env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONHOME", None)
    env.pop("PYTHONPATH", None)
    paths = env.get("PATH", "").split(os.pathsep)
    if venv:
        paths = [p for p in paths if not p.startswith(venv)]
    paths = [p for p in paths if not Path(p, "activate").exists()]  # any other venv's bin/
    env["PATH"] = os.pathsep.join(paths)
    return env


def run(command: str, expected: str, timeout: float) -> bool:
    with tempfile.TemporaryDirectory(prefix="opsaudit-setup-") as tmp:
        clone = Path(tmp) / "opsaudit"
        fresh_copy(clone)
        print(f"$ {command}\n  (in a fresh copy at {clone})", flush=True)
        started = time.monotonic()
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=clone,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # interleaved, so the tail below ends with the summary
            text=True,
            timeout=timeout,
        )
        seconds = time.monotonic() - started
        output = proc.stdout
        ok = proc.returncode == 0 and expected in output
        # On failure enough of the end to hold pytest's failures and its short summary.
        tail = "\n".join(output.rstrip().splitlines()[-15 if ok else -200 :])
        print(f"{tail}\n-> exit {proc.returncode} in {seconds:.0f}s: {'ok' if ok else 'FAILED'}\n")
        return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, choices=(1, 2), help="run only this command")
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds per command")
    args = parser.parse_args(argv)
    commands = setup_commands((ROOT / "README.md").read_text())
    if len(commands) != 2:
        print(f"expected 2 set-up commands in README.md, found {len(commands)}", file=sys.stderr)
        return 1
    ok = True
    for number, (command, expected) in enumerate(zip(commands, EXPECTED), start=1):
        if args.only in (None, number):
            ok = run(command, expected, args.timeout) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
