"""Chunks waiting for a commit are bounded in number, not only in rows and seconds (issue 24):
each holds its project's state changes and listings until the commit, so ten thousand small
projects walked unpaced (~2,000 in one `commit_seconds`) held +55 MiB of peak RSS."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from exporter.engine.sync import NullObserver, SyncConfig, sync

from .conftest import assert_matches_truth


class _Commits(NullObserver):
    def __init__(self) -> None:
        self.count = 0

    def committed(self, versions: int, files: int) -> None:
        self.count += 1


def _commits(make_sim: Any, data_dir: Path, commit_chunks: int | None) -> int:
    # The same account each time (same seed); one walk at a time: the chunks arrive in order.
    sim = make_sim(seed=61, projects=12, shared_projects=0, days=2, ops_per_project_per_day=4)
    observer = _Commits()
    summary = sync(
        SyncConfig(
            data_dir=data_dir,
            api_key=sim.personal_key,
            base_url=sim.base_url,
            max_rps=None,
            concurrency=1,
            commit_seconds=3600,  # never by time: by the bound, or once at the end
            commit_chunks=commit_chunks,
        ),
        observer,
    )
    assert summary.outcome == "ok"
    assert_matches_truth(sim, data_dir)
    return observer.count


def test_a_commit_holds_at_most_commit_chunks_chunks(make_sim: Any, tmp_path: Path) -> None:
    chunks = _commits(make_sim, tmp_path / "one", 1)  # every chunk its own commit
    assert chunks >= 12  # at least one per project
    assert _commits(make_sim, tmp_path / "four", 4) == math.ceil(chunks / 4)
    assert _commits(make_sim, tmp_path / "unbounded", None) == 1
