"""Write `notebooks/overview.ipynb` from the cell sources below, outputs cleared.

The notebook is generated so that its committed form never carries outputs, execution counts or
local paths (STYLE.md: sqlite-utils' tutorial leaked paths in stale outputs); edit the cells here
and rerun `python scripts/build_notebook.py`. `tests/test_notebook.py` checks the committed file
matches and executes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "overview.ipynb"

# The PNG files the notebook writes to $OPSAUDIT_NOTEBOOK_OUT (the test checks each one).
FIGURES = (
    "failure_rate.png",
    "durations_by_action.png",
    "action_mix.png",
    "compute_start_latency.png",
)

CELLS: list[tuple[str, str]] = [
    (
        "markdown",
        """\
# opsaudit — overview

Failure rate over time, duration distributions per action, the action mix over time, the slowest
and most-retried operations, and compute start latency, from an opsaudit dataset.

* `OPSAUDIT_DATA_DIR` — the data directory to read (the one `opsaudit sync` writes). When it is
  not set, the notebook builds a demo dataset with the built-in simulator (about 20 seconds).
* `OPSAUDIT_NOTEBOOK_OUT` — where the figures are saved as PNG (default: a new temporary directory).

Every number comes from opsaudit's own DuckDB views (`exporter.connect`): the notebook only plots.""",
    ),
    (
        "code",
        """\
import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows: the same in Jupyter, nbclient and CI
import matplotlib.pyplot as plt
from IPython.display import Image, Markdown, display

import exporter
from exporter._demo import run_demo

if os.environ.get("OPSAUDIT_DATA_DIR"):
    DATA_DIR = Path(os.environ["OPSAUDIT_DATA_DIR"])
else:
    DATA_DIR = run_demo().data_dir
OUT = Path(os.environ.get("OPSAUDIT_NOTEBOOK_OUT") or tempfile.mkdtemp(prefix="opsaudit-plots-"))
OUT.mkdir(parents=True, exist_ok=True)
con = exporter.connect(DATA_DIR)


def rows(sql, params=None):
    \"\"\"Run SQL on the dataset's views; a list of dicts, one per row.\"\"\"
    rel = con.execute(sql, params or [])
    names = [d[0] for d in rel.description]
    return [dict(zip(names, r)) for r in rel.fetchall()]


def save(fig, name):
    \"\"\"Save a figure as OUT/name and show it.\"\"\"
    path = OUT / name
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    display(Image(filename=str(path)))


def table(data, columns):
    \"\"\"Show rows as a Markdown table.\"\"\"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in data]
    display(Markdown("\\n".join(lines)))


totals = rows(
    "SELECT count(*) AS operations, count(DISTINCT project_id) AS projects, "
    "min(created_at) AS first, max(created_at) AS last FROM operations"
)[0]
totals""",
    ),
    (
        "markdown",
        "## Failure rate over time\n\nShare of each day's operations that failed at least once, and that are failed now.",
    ),
    (
        "code",
        """\
daily = rows(
    "SELECT created_at::DATE AS day, count(*) AS n, "
    "count(*) FILTER (WHERE failures_count > 0) AS ever_failed, "
    "count(*) FILTER (WHERE status IN ('failed', 'error')) AS failed_now "
    "FROM operations GROUP BY day ORDER BY day"
)
fig, ax = plt.subplots(figsize=(10, 4))
days = [r["day"] for r in daily]
ax.plot(days, [100 * r["ever_failed"] / r["n"] for r in daily], label="failed at least once")
ax.plot(days, [100 * r["failed_now"] / r["n"] for r in daily], label="failed now")
ax.set_ylabel("% of operations")
ax.set_title("Failure rate per day (UTC, by created_at)")
ax.legend()
fig.autofmt_xdate()
save(fig, "failure_rate.png")""",
    ),
    (
        "markdown",
        "## Duration distribution per action\n\n`total_duration_ms` of finished operations, log scale.",
    ),
    (
        "code",
        """\
durations = rows(
    "SELECT action, list(total_duration_ms) AS ms FROM operations "
    "WHERE status = 'finished' AND total_duration_ms > 0 "
    "GROUP BY action ORDER BY median(total_duration_ms) DESC"
)
fig, ax = plt.subplots(figsize=(10, 0.4 * len(durations) + 1.5))
ax.boxplot([r["ms"] for r in durations], vert=False, showfliers=False)
ax.set_yticks(range(1, len(durations) + 1), [r["action"] for r in durations])
ax.set_xscale("log")
ax.set_xlabel("total_duration_ms")
ax.set_title("Duration per action (finished operations; whiskers 1.5 IQR)")
save(fig, "durations_by_action.png")""",
    ),
    ("markdown", "## Action mix over time"),
    (
        "code",
        """\
mix = rows(
    "SELECT created_at::DATE AS day, action, count(*) AS n FROM operations "
    "GROUP BY ALL ORDER BY day, action"
)
actions = sorted({r["action"] for r in mix})
days = sorted({r["day"] for r in mix})
counts = {(r["day"], r["action"]): r["n"] for r in mix}
fig, ax = plt.subplots(figsize=(10, 5))
ax.stackplot(days, [[counts.get((d, a), 0) for d in days] for a in actions], labels=actions)
ax.set_ylabel("operations per day")
ax.set_title("Action mix per day (UTC, by created_at)")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
fig.autofmt_xdate()
save(fig, "action_mix.png")""",
    ),
    ("markdown", "## The slowest operations"),
    (
        "code",
        """\
table(
    rows(
        "SELECT id, project_id, action, status, total_duration_ms, created_at FROM operations "
        "WHERE total_duration_ms IS NOT NULL ORDER BY total_duration_ms DESC, id LIMIT 10"
    ),
    ["id", "project_id", "action", "status", "total_duration_ms", "created_at"],
)""",
    ),
    (
        "markdown",
        "## The most-retried operations\n\n`failures_count` is how many times the platform "
        "retried; `versions` is how many distinct states opsaudit recorded.",
    ),
    (
        "code",
        """\
table(
    rows(
        "SELECT o.id, o.project_id, o.action, o.status, o.failures_count, "
        "(SELECT count(*) FROM operation_versions v WHERE v.id = o.id) AS versions "
        "FROM operations o WHERE o.failures_count > 0 "
        "ORDER BY o.failures_count DESC, o.id LIMIT 10"
    ),
    ["id", "project_id", "action", "status", "failures_count", "versions"],
)""",
    ),
    (
        "markdown",
        "## Compute start latency\n\n`total_duration_ms` of finished `start_compute` operations: "
        "the distribution, and its daily median and 95th percentile.",
    ),
    (
        "code",
        """\
starts = rows(
    "SELECT created_at::DATE AS day, total_duration_ms AS ms FROM operations "
    "WHERE action = 'start_compute' AND status = 'finished' AND total_duration_ms IS NOT NULL"
)
per_day = rows(
    "SELECT created_at::DATE AS day, quantile_cont(total_duration_ms, 0.5) AS p50, "
    "quantile_cont(total_duration_ms, 0.95) AS p95 FROM operations "
    "WHERE action = 'start_compute' AND status = 'finished' AND total_duration_ms IS NOT NULL "
    "GROUP BY day ORDER BY day"
)
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
left.hist([r["ms"] for r in starts], bins=50)
left.set_xlabel("total_duration_ms")
left.set_ylabel("operations")
left.set_title(f"start_compute latency ({len(starts):,} operations)")
right.plot([r["day"] for r in per_day], [r["p50"] for r in per_day], label="median")
right.plot([r["day"] for r in per_day], [r["p95"] for r in per_day], label="p95")
right.set_ylabel("ms")
right.set_title("start_compute latency per day")
right.legend()
fig.autofmt_xdate()
save(fig, "compute_start_latency.png")""",
    ),
    (
        "code",
        """\
con.close()
sorted(p.name for p in OUT.glob("*.png"))""",
    ),
]


def build() -> nbformat.NotebookNode:
    """The notebook, outputs cleared, with the generic python3 kernel (no local paths)."""
    cells = [
        new_markdown_cell(src) if kind == "markdown" else new_code_cell(src) for kind, src in CELLS
    ]
    nb = new_notebook(
        cells=cells,
        metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
    )
    # Stable cell ids: regenerating must not change the file when the cells did not change.
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


def render() -> str:
    """The notebook file's exact text."""
    return nbformat.writes(build()) + "\n"


def main() -> int:
    if "--check" in sys.argv[1:]:
        if NOTEBOOK.read_text() != render():
            print("notebooks/overview.ipynb is stale: run python scripts/build_notebook.py")
            return 1
        return 0
    NOTEBOOK.parent.mkdir(exist_ok=True)
    NOTEBOOK.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
