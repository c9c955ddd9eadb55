"""When an open operation is due for a re-read (PRODUCT.md: Current; a cron run costs what is new).

Real accounts keep `failed` operations for months, and re-reading every one of them in every run
costs a whole backfill per run. So each tracked operation has a schedule:

- hot, re-read in every run: created or changed within the last hour (they sit in the first
  pages, so this is nearly free), a `retry_at` that has passed since the last read, a finished
  operation still settling (it may change in place), a pending 404, or no known change time (a
  state written before the schedule existed);
- colder ones when their last read is older than a quarter of the time between their last change
  and that read (changed four days before it: re-read about daily), and at least every
  `every_us` (`--refresh-open-every`, default 24 h). The staleness bound of a change is then a
  quarter of the time since the previous change, at most `every_us`, plus the time to the next
  run.
- `every_us == 0`: every tracked operation in every run (after an exit-0 run `operations` equals
  the API).

Due times are rounded down to the project's slots, so that a project's cold operations come due
together and one walk of its pages re-reads them (the cheapest plan prefers it to many GETs):
operations held by the `every_us` bound at one instant per project and period (a phase taken
from the project id), the others on a grid of 1, 2, 4 or 8 hours (the largest not above their
interval) with the same phase; the grids nest, so the coarser batches meet the finer ones.
Different projects' phases spread their sweeps over the runs of the day instead of one run
carrying every project's. Rounding down only ever brings a re-read forward (at most halving the
interval), so the bounds above hold.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from exporter.store.state import OpenOp

US_PER_SECOND = 1_000_000
HOT_US = 3600 * US_PER_SECOND  # created or changed this recently: every run
FRACTION = 0.25  # re-read when the last read is older than this share of the quiet time
DEFAULT_EVERY_US = 86_400 * US_PER_SECOND  # --refresh-open-every's default (24 h)
# Periods of the slots a quarter-rule re-read is rounded to (nested: each divides the next, and
# 8 h divides the default bound's 24 h).
GRIDS_US = tuple(h * HOT_US for h in (8, 4, 2, 1))


@dataclass(frozen=True)
class RefreshSchedule:
    """The refresh schedule of one run; `every_us` 0 re-reads every tracked operation."""

    every_us: int = DEFAULT_EVERY_US

    @property
    def strict(self) -> bool:
        return self.every_us <= 0

    def due(self, op: OpenOp, now: int) -> bool:
        """Whether a run at `now` must re-read `op` (the walk re-reads what it passes anyway)."""
        if self.strict or op.changed_us is None or not op.is_open or op.misses:
            return True
        if now - max(op.created_us, op.changed_us) < HOT_US:
            return True
        if op.retry_us is not None and op.checked_us < op.retry_us <= now:
            return True
        return now >= self.next_due(op)

    def next_due(self, op: OpenOp) -> int:
        """When a cold operation is due: at its project's last slot before a quarter of its
        quiet time has passed since its last read, or before `every_us` has."""
        changed = op.changed_us if op.changed_us is not None else op.checked_us
        interval = int(max(0, op.checked_us - changed) * FRACTION)
        if interval >= self.every_us:
            return slot(op.project_id, op.checked_us + self.every_us, self.every_us)
        latest = op.checked_us + interval
        for grid in GRIDS_US:
            if grid <= interval:
                return slot(op.project_id, latest, grid)
        return latest


def slot(project_id: str, latest: int, every_us: int) -> int:
    """The last instant at or before `latest` that is the project's phase modulo `every_us`."""
    phase = zlib.crc32(project_id.encode()) * 1_000_003 % every_us
    return latest - (latest - phase) % every_us


STRICT = RefreshSchedule(0)

__all__ = [
    "DEFAULT_EVERY_US",
    "FRACTION",
    "GRIDS_US",
    "HOT_US",
    "STRICT",
    "RefreshSchedule",
    "slot",
]
