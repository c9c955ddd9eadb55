"""scripts/compare_outputs.py, the before/after proof of issue 20: on one tiny dataset, two
recordings of the same tree are byte for byte the same (the pinned clock reaches the outputs), and
a single changed byte makes `compare` exit 1 naming the file, an unfinished recording exit 2."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "compare_outputs.py"


def _script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_recordings_of_one_tree_are_identical_and_a_changed_byte_is_found(
    tmp_path: Path,
) -> None:
    dataset, a, b = tmp_path / "dataset", tmp_path / "a", tmp_path / "b"
    made = _script("generate", dataset, "--tree", ROOT, "--size", "tiny", "--no-lake")
    assert made.returncode == 0, made.stderr
    for out in (a, b):
        recorded = _script("record", out, "--dataset", dataset, "--tree", ROOT, "--quick")
        assert recorded.returncode == 0, recorded.stderr

    # Every command ran as it does from a shell: exit codes as documented (8: check findings,
    # 2: a refused statement), the html page and the metrics file written.
    exits = {p.stem: p.read_text() for p in (a / "local").glob("*.exit")}
    assert exits == {
        **{f"query-by-status-{f}": "0\n" for f in ("table", "json", "jsonl", "csv", "markdown")},
        "query-refused": "2\n",
        "report-table": "0\n",
        "report-json": "0\n",
        "report-html": "0\n",
        "status-table": "0\n",
        "status-json": "0\n",
        "check-text": "0\n",
        "check-findings-text": "8\n",
    }
    assert (a / "local" / "report-html.file").read_text().startswith("<!DOCTYPE html>")
    assert (
        "opsaudit_last_success_timestamp_seconds "
        in (a / "local" / "check-findings-text.file").read_text()
    )

    # The clock every command saw is the dataset's pinned `now`, not the time of the recording.
    pin = json.loads((dataset / "manifest.json").read_text())["now"]
    report = json.loads((a / "local" / "report-json.stdout").read_text())
    assert report["headline"]["as_of"] == pin
    status = json.loads((a / "local" / "status-json.stdout").read_text())
    now = dt.datetime.fromisoformat(pin.replace("Z", "+00:00"))
    for project in status["projects"]:
        synced = dt.datetime.fromisoformat(project["last_synced_at"].replace("Z", "+00:00"))
        assert project["lag_seconds"] == int((now - synced).total_seconds())

    same = _script("compare", a, b)
    assert same.returncode == 0, same.stdout
    assert same.stdout.startswith("identical: ")

    changed = tmp_path / "changed"
    shutil.copytree(b, changed)
    page = changed / "local" / "status-table.stdout"
    lines = page.read_bytes().split(b"\n")
    n = next(i for i, line in enumerate(lines) if b"false" in line)
    lines[n] = lines[n].replace(b"false", b"falsE", 1)
    page.write_bytes(b"\n".join(lines))
    differs = _script("compare", a, changed)
    assert differs.returncode == 1
    assert differs.stdout.splitlines()[0] == f"DIFFERS local/status-table.stdout: line {n + 1}:"
    assert differs.stdout.splitlines()[-1].startswith("1 of ")

    # A recording cut short (record writes recorded-from.txt last) is not compared at all.
    (changed / "recorded-from.txt").unlink()
    unfinished = _script("compare", a, changed)
    assert unfinished.returncode == 2
    assert unfinished.stderr == f"{changed} is not a finished recording (no recorded-from.txt)\n"
