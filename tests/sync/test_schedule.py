"""The refresh schedule of open operations (issue 25; PRODUCT.md: a cron run costs what is new).

Every test runs syncs of the simulator on loopback with the simulator's clock as the sync's
(`sim_clock`): days of cron in seconds. Requests are counted at the simulator, per route.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from exporter.cli import cli
from exporter.engine.walk import WalkLimits

from .conftest import assert_matches_truth, empty_sim, latest_raw, run_sync, sim_clock

DAY = 86_400
LISTING = "GET /projects/{project_id}/operations"
GET_ONE = "GET /projects/{project_id}/operations/{operation_id}"
# Pages of 3: an operation below the first page needs a GET or a longer walk.
LIMITS = WalkLimits(page_size=3, flush_rows=9)
SETTLED = 16 * 60  # a finished operation is tracked for 15 minutes after its updated_at


def _checked(data_dir: Path) -> dict[str, int]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return dict(con.execute("SELECT id, checked_us FROM open_ops").fetchall())
    finally:
        con.close()


def _requests(sim: Any) -> dict[str, int]:
    return {k: v for k, v in sim.stats()["by_route"].items() if k in (LISTING, GET_ONE)}


def _world(make_sim: Any, seed: int, above: int = 12) -> tuple[Any, str, str]:
    """One project: a `failed` operation three weeks old under `above` finished ones (page 5 of
    pages of 3), finished long enough ago to have settled (they are not tracked)."""
    sim = empty_sim(make_sim, seed)
    pid = sim.project_ids()[0]
    [old] = sim.add_operations(pid, 1, status="failed")
    sim.advance(21 * DAY)
    sim.add_operations(pid, above, same_second=False)
    sim.advance(SETTLED)
    return sim, pid, old


def _sync(sim: Any, data_dir: Path, **kwargs: Any) -> None:
    kwargs.setdefault("refresh_open_every", DAY)
    summary = run_sync(sim, data_dir, limits=LIMITS, clock=sim_clock(sim), **kwargs)
    assert summary.outcome == "ok", (summary.outcome, summary.errors, summary.error)


def test_a_three_week_old_failed_operation_is_re_read_once_a_day_and_not_between(
    make_sim: Any, tmp_path: Path
) -> None:
    """Hourly runs for a day after the backfill: the three-week-old `failed` operation is
    re-read by exactly one of them, within 24 h (its bound) plus the hour to the next run, with
    one GET; every other run costs exactly one page (no change, nothing due)."""
    sim, _, old = _world(make_sim, 250)
    _sync(sim, tmp_path)
    backfill = _checked(tmp_path)[old]
    assert backfill == sim.world.clock_us
    reads = []
    for _ in range(24):
        sim.advance(3600)
        sim.reset_stats()
        _sync(sim, tmp_path)
        requests = _requests(sim)
        if _checked(tmp_path)[old] == sim.world.clock_us:
            reads.append(sim.world.clock_us)
            assert requests == {LISTING: 1, GET_ONE: 1}, requests
        else:
            assert requests == {LISTING: 1}, requests
    assert len(reads) == 1, reads
    assert 0 < reads[0] - backfill <= (DAY + 3600) * 1_000_000


def test_a_hot_operation_is_re_read_in_every_run(make_sim: Any, tmp_path: Path) -> None:
    """An operation created at a run, buried below the first page, is re-read by every run
    of its first hour (runs every 5 minutes), by one GET each; the cold one is not (unless its
    daily slot falls in that hour: then once)."""
    sim, pid, old = _world(make_sim, 251)
    _sync(sim, tmp_path)
    backfill = _checked(tmp_path)[old]
    sim.advance(1)
    [hot] = sim.add_operations(pid, 1, status="running")
    sim.add_operations(pid, 4, same_second=False)  # the hot one on the second page
    sim.advance(SETTLED)  # the finished ones on top have settled
    _sync(sim, tmp_path)  # the walk down to the checkpoint passes it (new)
    reads_of_old = 0
    for _ in range(8):  # its first hour
        sim.advance(300)
        sim.reset_stats()
        _sync(sim, tmp_path)
        checked = _checked(tmp_path)
        assert checked[hot] == sim.world.clock_us
        old_read = checked[old] == sim.world.clock_us
        reads_of_old += old_read
        assert _requests(sim) == {LISTING: 1, GET_ONE: 1 + old_read}
    assert reads_of_old <= 1
    assert reads_of_old or _checked(tmp_path)[old] == backfill
    assert_matches_truth(sim, tmp_path)


def test_retry_at_passing_makes_an_operation_due_in_the_next_run(
    make_sim: Any, tmp_path: Path
) -> None:
    """A three-week-old `failed` operation whose retry_at lies three hours after the backfill:
    not re-read before, re-read by the first run after it (and the platform's retry seen)."""
    from exporter.simulator._timefmt import fmt_seconds

    sim, _, old = _world(make_sim, 255)
    retry_at = fmt_seconds(sim.world.clock_us + 3 * 3600 * 1_000_000)
    # The operation's own change time stays three weeks back: only retry_at makes it due.
    updated_at = sim.ground_truth()[old]["updated_at"]
    sim.update_operation(old, retry_at=retry_at, updated_at=updated_at)
    _sync(sim, tmp_path)
    backfill = sim.world.clock_us
    for hour in (1, 2):
        sim.advance(3600)
        _sync(sim, tmp_path)
        assert _checked(tmp_path)[old] == backfill, f"re-read {hour} h after the backfill"
    sim.advance(3600 + 60)  # retry_at has passed: the platform retried it
    sim.update_operation(old, status="running", retry_at=None)
    sim.advance(240)
    sim.reset_stats()
    _sync(sim, tmp_path)
    assert _checked(tmp_path)[old] == sim.world.clock_us
    assert latest_raw(tmp_path)[old]["status"] == "running"
    assert _requests(sim) == {LISTING: 1, GET_ONE: 1}


def test_refresh_open_every_0_re_reads_every_open_operation_in_every_run(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--refresh-open-every 0` (the library's 0): the cold operation is re-read by every run,
    so a change the platform made a minute after the backfill is in the next run."""
    sim, _, old = _world(make_sim, 252)
    _sync(sim, tmp_path, refresh_open_every=0)
    for _ in range(3):
        sim.advance(300)
        sim.reset_stats()
        _sync(sim, tmp_path, refresh_open_every=0)
        assert _checked(tmp_path)[old] == sim.world.clock_us
        assert _requests(sim) == {LISTING: 1, GET_ONE: 1}
    sim.update_operation(old, failures_count=7, updated_at=None)
    sim.advance(300)
    _sync(sim, tmp_path, refresh_open_every=0)
    assert latest_raw(tmp_path)[old]["failures_count"] == 7
    assert_matches_truth(sim, tmp_path)


def test_a_change_is_seen_within_a_quarter_of_the_quiet_time(make_sim: Any, tmp_path: Path) -> None:
    """An open operation last changed 8 hours before the backfill: over the next 8 hours of
    runs every 15 minutes it is re-read on its project's 2 h grid (a quarter of 8 hours,
    rounded down to the grid), not in every run; then it changes, 16 hours after its previous
    change, and a run sees it within 4 hours (a quarter of 16) plus the time to the next run."""
    sim = empty_sim(make_sim, 253)
    pid = sim.project_ids()[0]
    [op] = sim.add_operations(pid, 1, status="failed")
    updated_at = sim.ground_truth()[op]["updated_at"]
    sim.advance(8 * 3600 - SETTLED)
    sim.add_operations(pid, 6, same_second=False)
    sim.advance(SETTLED)
    _sync(sim, tmp_path)
    backfill = sim.world.clock_us
    reads = []
    for _ in range(32):
        sim.advance(15 * 60)
        _sync(sim, tmp_path)
        if _checked(tmp_path)[op] == sim.world.clock_us:
            reads.append(sim.world.clock_us - backfill)
    assert 3 <= len(reads) <= 5, reads
    gaps = [b - a for a, b in itertools.pairwise([0, *reads])]
    assert all(gap >= 105 * 60 * 1_000_000 for gap in gaps[1:]), reads
    assert all(gap <= (2 * 3600 + 15 * 60) * 1_000_000 for gap in gaps), reads
    sim.update_operation(op, failures_count=2, updated_at=updated_at)  # in place
    changed = sim.world.clock_us
    while latest_raw(tmp_path)[op].get("failures_count") != 2:
        sim.advance(15 * 60)
        _sync(sim, tmp_path)
        assert sim.world.clock_us - changed <= (4 * 3600 + 15 * 60) * 1_000_000
    assert_matches_truth(sim, tmp_path)


def test_a_projects_cold_operations_come_due_together(make_sim: Any, tmp_path: Path) -> None:
    """Two open operations quiet for 9 and 12 hours at the backfill (quarters: 2 h 15 min and
    3 h): every re-read of either, over 8 hours of runs every 15 minutes, is made by a run on
    the project's 2 h grid (their due times are rounded down to its slots, whose 4 h and 24 h
    periods nest in it), so one run, one walk when that is cheaper, serves several."""
    sim = empty_sim(make_sim, 257)
    pid = sim.project_ids()[0]
    [b] = sim.add_operations(pid, 1, status="failed")
    sim.advance(3 * 3600)
    [a] = sim.add_operations(pid, 1, status="error")
    sim.add_operations(pid, 3, same_second=False)  # between them: different pages
    sim.advance(9 * 3600 - SETTLED)
    sim.add_operations(pid, 6, same_second=False)
    sim.advance(SETTLED)
    _sync(sim, tmp_path)
    reads: dict[str, list[int]] = {a: [], b: []}
    for _ in range(32):
        sim.advance(15 * 60)
        _sync(sim, tmp_path)
        checked = _checked(tmp_path)
        for op in (a, b):
            if checked[op] == sim.world.clock_us:
                reads[op].append(sim.world.clock_us)
    assert reads[a] and reads[b], reads
    phases = {t % (2 * 3600 * 1_000_000) for t in reads[a] + reads[b]}
    assert len(phases) == 1, reads
    assert set(reads[a]) & set(reads[b]), reads  # at least once in the same run


def test_the_cli_flag_and_its_environment_variable(make_sim: Any, tmp_path: Path) -> None:
    """`opsaudit sync` on the wall clock: by default a cold open operation read seconds ago is
    not read again; `--refresh-open-every 0` (or OPSAUDIT_REFRESH_OPEN_EVERY=0) re-reads it."""
    sim, _, old = _world(make_sim, 254, above=1005)  # below the first page of 1000
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    base = ["sync", "--data-dir", str(tmp_path), "--max-rps", "0", "--no-progress"]

    def sync(*extra: str, **more_env: str) -> None:
        result = CliRunner().invoke(cli, [*base, *extra], env={**env, **more_env})
        assert result.exit_code == 0, result.output

    sync()
    sim.update_operation(old, failures_count=3, updated_at=None)
    sync()
    assert latest_raw(tmp_path)[old].get("failures_count") != 3  # cold: not due for a while
    sync("--refresh-open-every", "0")
    assert latest_raw(tmp_path)[old]["failures_count"] == 3
    sim.update_operation(old, failures_count=4, updated_at=None)
    sync(OPSAUDIT_REFRESH_OPEN_EVERY="0")
    assert latest_raw(tmp_path)[old]["failures_count"] == 4
    assert_matches_truth(sim, tmp_path)
    bad = CliRunner().invoke(cli, [*base, "--refresh-open-every", "soon"], env=env)
    assert bad.exit_code == 2


def test_status_check_and_metrics_show_open_operations_by_time_since_their_last_read(
    make_sim: Any, tmp_path: Path
) -> None:
    """Two hours after the backfill the cold operation was last read between 1 and 6 hours
    ago; `status`, `check` (JSON) and the metrics file say so, and `check` flags it once it
    passes the bound the sync ran with (24 h) plus an hour."""
    import datetime as dt

    from exporter.ops.check import run_check
    from exporter.ops.metrics import collect_metrics, render_metrics
    from exporter.ops.status import read_status

    sim, _, _ = _world(make_sim, 256)
    _sync(sim, tmp_path)
    backfill = sim.world.clock_us
    at = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
        microseconds=backfill + 2 * 3600 * 1_000_000
    )
    expected = {"1h": 0, "6h": 1, "24h": 0, "7d": 0, "older": 0}
    assert read_status(tmp_path, as_of=at).coverage["open_by_last_read"] == expected
    report = run_check(tmp_path, as_of=at, max_age=dt.timedelta(days=30))
    assert report.as_dict()["open_by_last_read"] == expected
    assert not [f for f in report.findings if f.check == "open_not_reread"]
    text = render_metrics(collect_metrics(tmp_path, as_of=at))
    assert 'opsaudit_open_operations_by_last_read{within="6h"} 1\n' in text
    assert 'opsaudit_open_operations_by_last_read{within="1h"} 0\n' in text
    late = at + dt.timedelta(hours=23, minutes=1)  # 25 h 1 min after the last read
    report = run_check(tmp_path, as_of=late, max_age=dt.timedelta(days=30))
    assert [f.check for f in report.findings if f.check == "open_not_reread"] == ["open_not_reread"]
    assert report.as_dict()["open_by_last_read"]["7d"] == 1


def test_a_run_wide_get_allowance_goes_to_due_operations_oldest_checked_first(
    make_sim: Any, tmp_path: Path
) -> None:
    """`max_gets_per_run` hands its GETs out oldest-checked first among the *due* operations:
    of two three-week-old `failed` operations read at the same instant, the one whose retry_at
    has passed gets the single GET, though the other sorts first."""
    from exporter.simulator._timefmt import fmt_seconds

    sim = empty_sim(make_sim, 258)
    pid = sim.project_ids()[0]
    first, second = sorted(sim.add_operations(pid, 2, status="failed"))
    sim.advance(21 * DAY)
    sim.add_operations(pid, 12, same_second=False)
    sim.advance(SETTLED)
    retry_at = fmt_seconds(sim.world.clock_us + 3600 * 1_000_000)
    sim.update_operation(
        second, retry_at=retry_at, updated_at=sim.ground_truth()[second]["updated_at"]
    )
    _sync(sim, tmp_path)
    backfill = sim.world.clock_us
    sim.advance(2 * 3600)
    sim.reset_stats()
    _sync(sim, tmp_path, max_gets_per_run=1)
    checked = _checked(tmp_path)
    assert (checked[first], checked[second]) == (backfill, sim.world.clock_us)
    assert _requests(sim) == {LISTING: 1, GET_ONE: 1}


def test_a_resumed_walk_extends_the_newest_walk_over_what_the_cut_run_read(
    make_sim: Any, tmp_path: Path
) -> None:
    """A run cut short (budget, Ctrl-C) read the newest pages and their open operations; the
    next run finishes that walk to the bottom, then walks the newest down to its top. The open
    operations read by the cut run sit just below: the cheapest plan walks on one page. It took
    the bottom of the whole history for the newest walk's, found nothing below it and read
    every one by a GET (a backfill cut at 8 requests: 127 requests where ~13 do)."""
    sim = empty_sim(make_sim, 33)
    pid = sim.project_ids()[0]
    sim.add_operations(pid, 9, status="finished", same_second=False)
    sim.advance(SETTLED)
    sim.add_operations(pid, 6, status="running", same_second=False)
    sim.advance(60)
    listing = 3  # organizations, the org's projects, shared projects
    cut = run_sync(sim, tmp_path, limits=LIMITS, clock=sim_clock(sim), max_requests=listing + 2 + 2)
    assert (cut.outcome, cut.new_operations) == ("budget", 6)  # two pages, then the names
    sim.add_operations(pid, 3, status="finished", same_second=False)
    sim.advance(60)
    sim.reset_stats()
    _sync(sim, tmp_path, refresh_open_every=0)
    # The rest of the cut walk (3 pages and the empty one past them), the newest (2 pages),
    # one page more over the three open operations below it: no GET.
    assert _requests(sim) == {LISTING: 7}
    assert_matches_truth(sim, tmp_path)
