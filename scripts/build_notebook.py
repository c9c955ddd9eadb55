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
    "failures_by_branch.png",
    "compute_start_latency.png",
)

CELLS: list[tuple[str, str]] = [
    (
        "markdown",
        """\
# opsaudit — overview

Failure rate over time, duration distributions per action, the action mix over time, failures
per branch (by name), the slowest and most-retried operations, and compute start latency, from an
opsaudit dataset.

* `OPSAUDIT_DATA_DIR` — the data directory to read (the one `opsaudit sync` writes). When it is
  not set, the notebook builds a demo dataset with the built-in simulator (a few seconds).
* `OPSAUDIT_NOTEBOOK_OUT` — where the figures are saved as PNG (default: a new temporary directory).

Every number comes from opsaudit's own DuckDB views (`exporter.connect`, defined in `sql/`): the
notebook only selects and plots.""",
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

if os.environ.get("OPSAUDIT_DATA_DIR"):
    DATA_DIR = Path(os.environ["OPSAUDIT_DATA_DIR"])
else:
    DATA_DIR = exporter.run_demo().data_dir
OUT = Path(os.environ.get("OPSAUDIT_NOTEBOOK_OUT") or tempfile.mkdtemp(prefix="opsaudit-plots-"))
OUT.mkdir(parents=True, exist_ok=True)
con = exporter.connect(DATA_DIR)


def result(sql):
    \"\"\"Run SQL on the dataset's views: its column names and rows.\"\"\"
    relation = con.sql(sql)
    return relation.columns, relation.fetchall()


def rows(sql):
    \"\"\"Run SQL on the dataset's views; a list of dicts, one per row.\"\"\"
    columns, data = result(sql)
    return [dict(zip(columns, r)) for r in data]


def table(sql):
    \"\"\"Show a query's result as a Markdown table.\"\"\"
    display(Markdown(exporter.render(*result(sql), "markdown")))


def save(fig, name):
    \"\"\"Save a figure as OUT/name and show it.\"\"\"
    path = OUT / name
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    display(Image(filename=str(path)))


table(
    "SELECT count(*) AS operations, count(DISTINCT project_id) AS projects, "
    "min(created_at) AS first, max(created_at) AS last FROM operations"
)""",
    ),
    (
        "markdown",
        "## Failure rate over time\n\n`failures_by_day`: the share of each day's operations "
        "that failed at least once (the platform retried them), and of those failing now.",
    ),
    (
        "code",
        """\
daily = rows("SELECT * FROM failures_by_day")
fig, ax = plt.subplots(figsize=(10, 4))
days = [r["day"] for r in daily]
ax.plot(days, [100 * r["failure_rate"] for r in daily], label="failed at least once")
ax.plot(days, [100 * r["failing_now"] / r["operations"] for r in daily], label="failing now")
ax.set_ylabel("% of operations")
ax.set_title("Failure rate per day (UTC, by created_at)")
ax.legend()
fig.autofmt_xdate()
save(fig, "failure_rate.png")""",
    ),
    (
        "markdown",
        "## Duration distribution per action\n\n`duration_by_action`: `total_duration_ms` "
        "percentiles of terminal operations, log scale.",
    ),
    (
        "code",
        """\
durations = rows(
    "SELECT action, p50_ms, p90_ms, p99_ms, max_ms FROM duration_by_action "
    "WHERE p50_ms IS NOT NULL ORDER BY p50_ms"
)
fig, ax = plt.subplots(figsize=(10, 0.3 * len(durations) + 1.5))
y = range(len(durations))
ax.hlines(y, [r["p50_ms"] for r in durations], [r["max_ms"] for r in durations], color="lightgray")
for key, marker in (("p50_ms", "o"), ("p90_ms", "s"), ("p99_ms", "^"), ("max_ms", "|")):
    values = [max(r[key], 1) for r in durations]  # log scale: a 0 ms duration shows as 1 ms
    ax.plot(values, y, marker, label=key.removesuffix("_ms"))
ax.set_yticks(y, [r["action"] for r in durations])
ax.set_xscale("log")
ax.set_xlabel("total_duration_ms")
ax.set_title("Duration per action (terminal operations)")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
save(fig, "durations_by_action.png")""",
    ),
    ("markdown", "## Action mix over time\n\n`action_mix_by_day`, stacked."),
    (
        "code",
        """\
mix = rows("SELECT day, action, operations FROM action_mix_by_day")
totals = {}
for r in mix:
    totals[r["action"]] = totals.get(r["action"], 0) + r["operations"]
actions = sorted(totals, key=totals.get, reverse=True)
days = sorted({r["day"] for r in mix})
counts = {(r["day"], r["action"]): r["operations"] for r in mix}
fig, ax = plt.subplots(figsize=(10, 5))
ax.stackplot(days, [[counts.get((d, a), 0) for d in days] for a in actions], labels=actions)
ax.set_ylabel("operations per day")
ax.set_title("Action mix per day (UTC, by created_at)")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="x-small")
fig.autofmt_xdate()
save(fig, "action_mix.png")""",
    ),
    (
        "markdown",
        "## Failures per branch\n\n`failures_by_branch`: branches by name, not id (the latest "
        "name opsaudit read from the branches listing; a deleted branch keeps it and gets "
        "`deleted_at`). The branches with the most operations that failed at least once.",
    ),
    (
        "code",
        """\
branches = rows(
    "SELECT branch_id, branch_name, deleted_at, operations, failed, failing_now "
    "FROM failures_by_branch ORDER BY failed DESC, operations DESC, branch_id LIMIT 15"
)


def branch_label(r):
    \"\"\"`name (id)`, `(deleted)` once its project's listing no longer has it; the id alone
    for a branch never listed.\"\"\"
    label = r["branch_id"] if r["branch_name"] is None else f"{r['branch_name']} ({r['branch_id']})"
    return label + (" (deleted)" if r["deleted_at"] is not None else "")


fig, ax = plt.subplots(figsize=(10, 0.35 * len(branches) + 1.5))
y = range(len(branches))[::-1]  # the most failures on top
ax.barh(y, [r["failed"] for r in branches], label="failed at least once")
ax.barh(y, [r["failing_now"] for r in branches], label="failing now", height=0.4)
ax.set_yticks(y, [branch_label(r) for r in branches])
ax.set_xlabel("operations")
ax.set_title("Failures per branch (top 15)")
ax.legend(loc="lower right")
save(fig, "failures_by_branch.png")
table(
    "SELECT o.action, b.name AS branch, o.branch_id, b.deleted_at IS NOT NULL AS deleted, "
    "count(*) AS failed FROM operations AS o LEFT JOIN branches AS b ON b.id = o.branch_id "
    "WHERE o.failures_count > 0 AND o.branch_id IS NOT NULL "
    "GROUP BY ALL ORDER BY failed DESC, o.branch_id, o.action LIMIT 10"
)""",
    ),
    ("markdown", "## The slowest operations"),
    (
        "code",
        """\
table(
    "SELECT id, project_id, action, status, total_duration_ms, created_at FROM operations "
    "WHERE total_duration_ms IS NOT NULL ORDER BY total_duration_ms DESC, id LIMIT 10"
)""",
    ),
    (
        "markdown",
        "## The most-retried operations\n\n`retried_operations`: `failures_count` is how many "
        "attempts failed; `versions` is how many distinct states opsaudit recorded.",
    ),
    (
        "code",
        """\
table(
    "SELECT id, project_id, action, status, failures_count, versions, error "
    "FROM retried_operations LIMIT 10"
)""",
    ),
    (
        "markdown",
        "## Compute start latency\n\n`compute_start_latency_histogram` and "
        "`compute_start_latency_by_day`: `total_duration_ms` of finished `start_compute` "
        "operations.",
    ),
    (
        "code",
        """\
table("SELECT * FROM compute_start_latency")
buckets = rows("SELECT from_ms, to_ms, operations FROM compute_start_latency_histogram")
per_day = rows("SELECT day, p50_ms, p90_ms, p99_ms FROM compute_start_latency_by_day")
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
left.bar(
    [f"<{b['to_ms']:,}" for b in buckets], [b["operations"] for b in buckets], color="tab:blue"
)
left.set_xlabel("total_duration_ms (power-of-two buckets)")
left.set_ylabel("operations")
left.set_title("start_compute latency")
left.tick_params(axis="x", labelrotation=60)
for key in ("p50_ms", "p90_ms", "p99_ms"):
    right.plot(
        [r["day"] for r in per_day], [r[key] for r in per_day], label=key.removesuffix("_ms")
    )
right.set_yscale("log")
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
