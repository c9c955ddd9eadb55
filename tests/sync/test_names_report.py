"""The report speaks names (issue 21): failures per branch by name, deleted branches marked,
"start_compute failed 4 times on `preview/pr-42` (br-...)", over a dataset synced from the
simulator's listings (renames and deletions read as the sync reads them)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import orjson

import exporter
from exporter.analytics.html import render_html
from exporter.analytics.report import build_report
from exporter.analytics.report_text import render_report

from .conftest import empty_project_sim, run_sync


def _named_world(make_sim: Any, tmp_path: Path) -> dict[str, Any]:
    """One project: `preview/pr-42` (renamed `release/1.0` later) with 4 start_compute that
    failed once each (one still failing), `dev/alice` (deleted) with two apply_config that failed
    twice each, and one failed operation on a branch the listings never had. Synced twice: the second run
    re-reads the lists (the rename, the deletion)."""
    # The simulated clock starts an hour before the wall clock: every operation is created
    # before the syncs read the lists (names are valid from when they were read).
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    sim, pid = empty_project_sim(make_sim, seed=61, start=start.strftime("%Y-%m-%dT%H:%M:%SZ"))
    preview, preview_ep, _ = sim.add_branch(pid, "preview/pr-42")  # create_branch, start_compute
    alice, _alice_ep, _ = sim.add_branch(pid, "dev/alice")
    failed = sim.add_operations(pid, 4, action="start_compute", same_second=False)
    for i, op_id in enumerate(failed):
        sim.update_operation(
            op_id,
            branch_id=preview,
            endpoint_id=preview_ep,
            failures_count=1,
            status="failed" if i == 0 else "finished",
        )
    for op_id in sim.add_operations(pid, 2, action="apply_config", same_second=False):
        sim.update_operation(op_id, branch_id=alice, failures_count=2)
    [unlisted] = sim.add_operations(pid, 1, action="suspend_compute")
    sim.update_operation(unlisted, branch_id="br-never-listed-1", failures_count=1)
    run_sync(sim, tmp_path)
    sim.change_branch(preview, name="release/1.0")
    sim.delete_branch(alice)
    run_sync(sim, tmp_path, names_max_age=0)
    return {"project": pid, "preview": preview, "alice": alice}


def _report(data_dir: Path, top: int | None = None) -> Any:
    con = exporter.connect(data_dir)
    try:
        return build_report(con, now=dt.datetime.now(dt.timezone.utc), top=top)
    finally:
        con.close()


def test_report_failures_per_branch_by_name_deleted_marked(make_sim: Any, tmp_path: Path) -> None:
    w = _named_world(make_sim, tmp_path)
    pid, preview, alice = w["project"], w["preview"], w["alice"]
    report = _report(tmp_path)
    [alice_deleted_at] = [
        r[0]
        for r in exporter.connect(tmp_path)
        .execute(f"SELECT deleted_at FROM branches WHERE id = '{alice}'")
        .fetchall()
    ]
    assert alice_deleted_at is not None
    assert report.branches == [
        # 2 of add_branch (create_branch, start_compute) + 4 failed start_compute.
        {"branch_name": "release/1.0", "branch_id": preview, "project_id": pid}
        | {"deleted_at": None, "operations": 6, "failed": 4, "failure_rate": 4 / 6}
        | {"retries": 4, "failing_now": 1},
        {"branch_name": "dev/alice", "branch_id": alice, "project_id": pid}
        | {"deleted_at": alice_deleted_at, "operations": 4, "failed": 2, "failure_rate": 0.5}
        | {"retries": 4, "failing_now": 0},
        {"branch_name": None, "branch_id": "br-never-listed-1", "project_id": pid}
        | {"deleted_at": None, "operations": 1, "failed": 1, "failure_rate": 1.0}
        | {"retries": 1, "failing_now": 0},
    ]
    assert [(r["action"], r["failed"], r["branch_id"]) for r in report.branch_failures] == [
        ("start_compute", 4, preview),
        ("apply_config", 2, alice),
        ("suspend_compute", 1, "br-never-listed-1"),
    ]
    # On-call's first table says which branch, by name: the one start_compute failing now.
    assert [
        (r["action"], r["branch_id"], r["branch_name"], r["branch_deleted_at"])
        for r in report.failing_operations
    ] == [("start_compute", preview, "release/1.0", None)]
    # ... as the table format fetches it (the first rows only: report_problems_top).
    shown = _report(tmp_path, top=10).failing_operations  # a later now: the ages may differ
    assert [r | {"age": None} for r in shown] == [
        r | {"age": None} for r in report.failing_operations
    ]
    table = render_report(report, "table")
    failing = table.split("Failing now (latest status failed or error), oldest first\n")[1]
    assert failing.splitlines()[0].split() == [
        "id", "project_id", "branch", "action", "status", "error", "age"
    ]  # fmt: skip
    assert f"  `release/1.0` ({preview})  start_compute  failed  " in failing.splitlines()[2]
    assert (
        f"By branch      start_compute failed 4 times on `release/1.0` ({preview}); "
        f"apply_config failed 2 times on `dev/alice` ({alice}, deleted); suspend_compute failed "
        "once on br-never-listed-1\n"
    ) in table
    section = table.split("Failures per branch (latest name; deleted: no longer listed)\n")[1]
    rows = [line.split("  ")[0] for line in section.split("\n\n")[0].splitlines()[2:-1]]
    assert rows == [
        f"`release/1.0` ({preview})",
        f"`dev/alice` ({alice}, deleted)",
        "br-never-listed-1",
    ]
    markdown = render_report(report, "markdown")
    assert (
        f"- **By branch**: start_compute failed 4 times on `release/1.0` ({preview}); "
        f"apply_config failed 2 times on `dev/alice` ({alice}, deleted); "
    ) in markdown
    assert f"| `dev/alice` ({alice}, deleted) | {pid} | 4 | 2 | 50.0 | 4 | 0 |" in markdown
    data = orjson.loads(render_report(report, "json"))
    assert [(r["branch_name"], r["deleted_at"] is None) for r in data["branches_failures"]] == [
        ("release/1.0", True),
        ("dev/alice", False),
        (None, True),
    ]
    assert data["headline"]["most_failures_by_branch"][0] == {
        "action": "start_compute",
        "failed": 4,
        "branch_name": "release/1.0",
        "branch_id": preview,
        "project_id": pid,
        "deleted_at": None,
    }
    csv = render_report(report, "csv", section="branches").splitlines()
    assert csv[0] == (
        "branch_name,branch_id,project_id,deleted_at,operations,failed,failure_rate,retries,"
        "failing_now"
    )
    assert csv[2].startswith(f"dev/alice,{alice},{pid},20")  # deleted_at, a timestamp


def test_html_page_names_branches_deleted_marked(make_sim: Any, tmp_path: Path) -> None:
    w = _named_world(make_sim, tmp_path)
    pid, preview, alice = w["project"], w["preview"], w["alice"]
    con = exporter.connect(tmp_path)
    try:
        page = render_html(con, build_report(con))
    finally:
        con.close()
    headline = page[page.index('<table class="headline">') :]
    assert (
        "<tr><th>Most failures by branch</th><td>start_compute failed 4 times on "
        f"`release/1.0` ({preview}); apply_config failed 2 times on `dev/alice` ({alice}, "
        "deleted); suspend_compute failed once on br-never-listed-1</td></tr>"
    ) in headline
    start = page.index("<h2>Failures per branch (latest name; deleted: no longer listed)</h2>")
    table = page[start : page.index("</table>", start)]
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in table.split("<tr>")[2:]]
    assert cells == [
        [f"`release/1.0` ({preview})", pid, "6", "4", "66.7 %", "4", "1"],
        [f"`dev/alice` ({alice}, deleted)", pid, "4", "2", "50.0 %", "4", "0"],
        ["br-never-listed-1", pid, "1", "1", "100.0 %", "1", "0"],
    ]


def test_readme_query_failures_per_branch_last_week(make_sim: Any, tmp_path: Path) -> None:
    """The README's example, run as printed: names then and now, deleted marked."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    after = readme.split("Failures per branch last week, with the branch's name then and now:")[1]
    sql = after.split("```sql\n", 1)[1].split("```", 1)[0]
    w = _named_world(make_sim, tmp_path)
    pid, preview, alice = w["project"], w["preview"], w["alice"]
    con = exporter.connect(tmp_path)
    try:
        got = con.execute(sql).fetchall()
    finally:
        con.close()
    # Every operation was created before the rename was read: its name then is the old one.
    assert got == [
        (pid, preview, "preview/pr-42", "release/1.0", False, 4, 6),
        (pid, alice, "dev/alice", "dev/alice", True, 2, 4),
        (pid, "br-never-listed-1", None, None, False, 1, 1),
    ]
