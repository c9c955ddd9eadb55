"""The demo: the built-in simulator with a realistic account, synced into a data directory.

`run_demo` is the whole pipeline a newcomer sees (`opsaudit demo`, the overview notebook) with no
key and no network: the simulator listens on a free loopback port, `sync()` exports it exactly as
it would a real account, and the caller gets the data directory back to query. Nothing here
prints; progress reaches the caller through the same observer `sync()` uses.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.core.errors import ConfigError
from exporter.core.layout import STATE_FILE, VERSIONS_DIR

if TYPE_CHECKING:
    from exporter.engine.sync import RunSummary, SyncObserver

__all__ = ["DEFAULT_DAYS", "DEFAULT_PROJECTS", "DEMO_SEED", "DemoResult", "run_demo"]

# A dozen projects over a month at 280 operations per project per day is ~100k operations:
# big enough for the report and the notebook's plots to look like a real account, small enough
# to sync in seconds on two cores (issue 5: "well under a minute").
DEFAULT_PROJECTS = 12
DEFAULT_DAYS = 30
OPS_PER_PROJECT_PER_DAY = 280
DEMO_SEED = 7  # fixed, so every newcomer sees the same account and the same report


@dataclass
class DemoResult:
    """Where the demo dataset is and what the sync did."""

    data_dir: Path
    views_db: Path  # `duckdb` on it, from its directory, opens the dataset with every view
    summary: RunSummary
    temporary: bool  # True when run_demo created data_dir itself (it is kept, not deleted)
    operations: int  # operations the simulator holds (its ground truth)
    seconds: float  # wall time of simulator start-up plus sync
    history_end: dt.datetime  # where the simulated history ends: the moment the demo ran


def _check_fresh(data_dir: Path) -> None:
    # The simulator invents a new account each time: syncing it into a dataset that already
    # holds another account (demo or real) would mix two histories in one audit trail.
    if data_dir.exists() and not data_dir.is_dir():
        raise ConfigError(f"--data-dir {data_dir} exists and is not a directory")
    if data_dir.is_dir() and any(data_dir.iterdir()):
        hint = (
            "it already holds a dataset"
            if (data_dir / STATE_FILE).exists() or (data_dir / VERSIONS_DIR).exists()
            else "it is not empty"
        )
        raise ConfigError(
            f"--data-dir {data_dir}: {hint}; the demo writes a fresh dataset, "
            "so give it a new or empty directory (or omit --data-dir for a temporary one)"
        )


def run_demo(
    data_dir: Path | None = None,
    observer: SyncObserver | None = None,
    *,
    projects: int = DEFAULT_PROJECTS,
    days: int = DEFAULT_DAYS,
    ops_per_project_per_day: int = OPS_PER_PROJECT_PER_DAY,
    seed: int = DEMO_SEED,
    now: dt.datetime | None = None,
    map_large_allocations: bool = False,
) -> DemoResult:
    """Start the simulator, sync it into `data_dir` (a new temp dir if None), stop it.

    The simulated history ends at `now` (default: the moment the demo runs, to the second), so
    `report --since 7d`, lags and ages read as they would on a live account; for a given seed
    the content is the same, shifted in time. Raises `ConfigError` if `data_dir` is not empty;
    sync errors propagate as from `sync()`. `map_large_allocations`: as `SyncConfig`'s (the
    command line's `opsaudit demo`; a notebook's process keeps its allocator).
    """
    # httpx, pyarrow: the CLI imports this module at start-up (`opsaudit --help`)
    from exporter.engine.sync import SyncConfig, sync
    from exporter.simulator import SimConfig, Simulator

    if projects < 1 or days < 1 or ops_per_project_per_day < 1:
        raise ConfigError("the demo needs at least one project, one day and one operation a day")
    temporary = data_dir is None
    if data_dir is None:
        import tempfile

        data_dir = Path(tempfile.mkdtemp(prefix="opsaudit-demo-"))
    else:
        _check_fresh(data_dir)
    started = time.monotonic()
    # Issue 15: a history ending on a fixed date made `report --since 7d` print 0 operations.
    end = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    end = end.replace(microsecond=0)
    # Some projects are shared with the user from another organization, as in real accounts
    # (discovery lists them separately); the total is still what the caller asked for.
    shared = projects // 6
    config = SimConfig(
        seed=seed,
        projects=projects - shared,
        shared_projects=shared,
        days=days,
        ops_per_project_per_day=ops_per_project_per_day,
        start=end.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    with Simulator(config) as sim:
        operations = sim.operation_count()
        # max_rps=None: the simulator is local and has no account to share, so pacing would
        # only make the demo slower (a real account wants the default 8 req/s).
        summary = sync(
            SyncConfig(
                data_dir=data_dir,
                api_key=sim.personal_key,
                base_url=sim.base_url,
                max_rps=None,
                map_large_allocations=map_large_allocations,
            ),
            observer,
        )
    return DemoResult(
        data_dir=data_dir,
        views_db=data_dir / "opsaudit.duckdb",
        summary=summary,
        temporary=temporary,
        operations=operations,
        seconds=time.monotonic() - started,
        history_end=end,
    )
