"""The library API as a notebook uses it (`import exporter`): it says what the command line says
(exit codes, refused values, accepted locations), refuses before it writes, and leaves the
process it runs in as it found it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import exporter
from exporter.core.model import DEFAULT_BASE_URL

from .conftest import run_sync


def test_an_interrupted_run_has_the_exit_code_of_ctrl_c(make_sim: Any, tmp_path: Path) -> None:
    """A run stopped through `stop` said exit code 5 (fatal) where the command line exits 130
    (README, exit codes): `RunSummary.exit_code` is what the CLI exits with."""
    sim = make_sim(seed=2201, projects=2, shared_projects=0, orgs=1, days=1)
    stop = threading.Event()
    stop.set()  # before the first page of the listing: nothing is walked
    summary = exporter.sync(
        exporter.SyncConfig(
            data_dir=tmp_path / "d",
            api_key=sim.personal_key,
            base_url=sim.base_url,
            max_rps=None,
        ),
        stop=stop,
    )
    assert (summary.outcome, summary.error) == ("interrupted", "interrupted while listing")
    assert int(summary.exit_code) == 130
    assert summary.exit_code is exporter.ExitCode.INTERRUPTED
    assert run_sync(sim, tmp_path / "d").exit_code == exporter.ExitCode.OK


def test_status_and_check_read_a_file_url_as_sync_and_connect_do(
    make_sim: Any, tmp_path: Path
) -> None:
    """`read_status` and `run_check` took `file:///abs/dir` for a path named `file:/abs/dir`
    ("--data-dir file:/... does not exist"), where `sync()`, `connect()` and the CLI read it."""
    sim = make_sim(seed=2205, projects=2, shared_projects=0, orgs=1, days=1)
    url = f"file://{tmp_path / 'd'}"
    assert run_sync(sim, url).outcome == "ok"  # type: ignore[arg-type]
    by_path = exporter.read_status(tmp_path / "d")
    by_url = exporter.read_status(url, as_of=by_path.as_of)
    assert by_url == by_path
    assert sorted(p["id"] for p in by_url.projects) == sorted(p.id for p in sim.world.projects)
    assert [r["outcome"] for r in by_url.runs] == ["ok"]
    checked = exporter.run_check(url, as_of=by_path.as_of)
    assert checked == exporter.run_check(tmp_path / "d", as_of=by_path.as_of)
    assert checked.findings == []


def test_a_bad_base_url_is_refused_before_the_data_directory_is_touched(tmp_path: Path) -> None:
    """The docstring's promise: `ConfigError` before anything is written. The data directory got
    its state, lock and a run left `running` (the next run then said `killed`)."""
    data = tmp_path / "d"
    config = exporter.SyncConfig(
        data_dir=data, api_key="k" * 64, base_url="ftp://example.com/api/v2/"
    )
    with pytest.raises(exporter.ConfigError) as err:
        exporter.sync(config)
    assert str(err.value) == (
        "--base-url 'ftp://example.com/api/v2/' is not an http(s) URL; expected something like "
        f"{DEFAULT_BASE_URL}"
    )
    assert not data.exists()
