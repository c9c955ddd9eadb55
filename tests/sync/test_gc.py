"""A run collects the young generation less often and leaves the process's collector as it found
it (client CPU, issue 24: a notebook that runs `sync()` keeps its own thresholds)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.engine.sync import (
    GC_YOUNG_THRESHOLD,
    NullObserver,
    SyncConfig,
    _fewer_collections,
    sync,
)

FOUND = (700, 11, 12)  # the process's thresholds before a run (not Python's default 10, 10)
RAISED = (GC_YOUNG_THRESHOLD, *FOUND[1:])  # during a run


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*FOUND)
    yield
    gc.set_threshold(*before)


class _Seen(NullObserver):
    """The thresholds in force when the run had listed the projects and at each commit."""

    def __init__(self, fail: bool = False) -> None:
        self.seen: list[tuple[int, int, int]] = []
        self.fail = fail

    def discovered(self, projects: int, stats: Any) -> None:
        self.seen.append(gc.get_threshold())
        if self.fail:
            raise RuntimeError("an observer's own error")

    def committed(self, versions: int, files: int) -> None:
        self.seen.append(gc.get_threshold())


def _config(sim: Any, data_dir: Path) -> SyncConfig:
    return SyncConfig(
        data_dir=data_dir, api_key=sim.personal_key, base_url=sim.base_url, max_rps=None
    )


def test_a_run_raises_the_young_threshold_and_restores_the_thresholds_after_it(
    make_sim: Any, tmp_path: Path, thresholds: None
) -> None:
    sim = make_sim(seed=7, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    observer = _Seen()
    summary = sync(_config(sim, tmp_path), observer)
    assert summary.outcome == "ok"
    assert summary.versions_written == len(sim.ground_truth(sim.project_ids())) > 0
    assert observer.seen and set(observer.seen) == {RAISED}
    assert gc.get_threshold() == FOUND


def test_a_run_that_raises_restores_the_thresholds(
    make_sim: Any, tmp_path: Path, thresholds: None
) -> None:
    sim = make_sim(seed=7, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    observer = _Seen(fail=True)
    with pytest.raises(RuntimeError, match="an observer's own error"):
        sync(_config(sim, tmp_path), observer)
    assert observer.seen == [RAISED]
    assert gc.get_threshold() == FOUND


def test_overlapping_runs_restore_the_thresholds_once_the_last_one_ends(
    thresholds: None,
) -> None:
    first, second = _fewer_collections(), _fewer_collections()
    first.__enter__()
    second.__enter__()
    try:
        assert gc.get_threshold() == RAISED
    finally:
        first.__exit__(None, None, None)  # the first run ends while the second goes on
    try:
        assert gc.get_threshold() == RAISED
    finally:
        second.__exit__(None, None, None)
    assert gc.get_threshold() == FOUND


def test_a_process_that_collects_less_often_already_keeps_its_threshold(
    thresholds: None,
) -> None:
    gc.set_threshold(GC_YOUNG_THRESHOLD * 2, 5, 5)
    with _fewer_collections():
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD * 2, 5, 5)
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD * 2, 5, 5)
