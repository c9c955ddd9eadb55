"""The library API as a notebook uses it (`import exporter`): it says what the command line says
(exit codes, refused values, accepted locations), refuses before it writes, and leaves the
process it runs in as it found it."""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable, Iterator
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


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"max_rps": -1}, "--max-rps -1 is not in the range x>=0 (0 or None: no pacing)"),
        ({"max_rps": float("nan")}, "--max-rps nan is not a finite number"),
        ({"concurrency": 0}, "--concurrency 0 is not in the range 1<=x<=64"),
        ({"concurrency": -3}, "--concurrency -3 is not in the range 1<=x<=64"),
        (
            {"refresh_open_every": -5},
            "--refresh-open-every -5 is not a duration: give 0 or more seconds",
        ),
        ({"names_max_age": -5}, "--names-max-age -5 is not a duration: give 0 or more seconds"),
        ({"time_budget": -1}, "--time-budget -1 is not a duration: give above 0 seconds"),
        (
            {"time_budget": 0},
            "--time-budget 0 is no time at all: give a duration above 0 (in seconds)",
        ),
        (
            {"full_sweep_every": 0},
            "--full-sweep-every 0 is no time at all: give a duration above 0 (in seconds)",
        ),
        (
            {"max_requests": 2},
            "--max-requests 2 does not cover a page of the projects listing and a project's "
            "branches and endpoints listings: 3 or more",
        ),
        (
            {"project_ids": "abc"},
            "--project ids are a list of strings, not the string 'abc'",
        ),
        ({"project_ids": [""]}, "--project an empty id; give the project's or organization's id"),
        ({"org_ids": [" org-1"]}, "--org-id ' org-1' has spaces around it; ids have none"),
        # A generator was used up by the check: the run synced nothing and said ok.
        (
            {"project_ids": (p.strip() for p in ["p-1 "])},
            "--project ids are a list of strings, not generator",
        ),
        # Types a notebook gets wrong: a bare TypeError, or 2.5 projects at once taken.
        ({"concurrency": "4"}, "--concurrency '4' is not an integer"),
        ({"concurrency": 2.5}, "--concurrency 2.5 is not an integer"),
        ({"max_rps": "8"}, "--max-rps '8' is not a number (seconds, for a duration)"),
        (
            {"time_budget": dt.timedelta(hours=1)},
            "--time-budget datetime.timedelta(seconds=3600) is not a number (seconds, for a "
            "duration)",
        ),
        ({"max_requests": "100"}, "--max-requests '100' is not an integer"),
        ({"names_max_age": None}, "--names-max-age None is not a number (seconds, for a duration)"),
        (
            {"refresh_open_every": True},
            "--refresh-open-every True is not a number (seconds, for a duration)",
        ),
        # An empty list (a task's filter that matched nothing) synced every project.
        ({"project_ids": []}, "--project: no ids; give None for every project the key reaches"),
        ({"org_ids": ()}, "--org-id: no ids; give None for every project the key reaches"),
    ],
)
def test_values_the_command_line_refuses_are_refused_before_anything_is_written(
    tmp_path: Path, setting: dict[str, Any], message: str
) -> None:
    """They were taken silently: `concurrency=0` walked on one thread, `project_ids="abc"` the
    projects 'a', 'b' and 'c', a negative `max_rps` or duration ran unpaced or re-read all."""
    data = tmp_path / "d"
    # An address that refuses at once: never a request out of the machine if this regresses.
    closed = "http://127.0.0.1:9/api/v2/"
    config = exporter.SyncConfig(data_dir=data, api_key="k" * 64, base_url=closed, **setting)
    with pytest.raises(exporter.ConfigError) as err:
        exporter.sync(config)
    assert str(err.value) == message
    assert not data.exists()


def test_an_events_config_the_command_line_refuses_is_refused_when_made() -> None:
    """A webhook without its secret was accepted and never delivered (each run "waiting",
    exit 0); filters given as text failed the run's commits after the whole run was read
    ("'str' object has no attribute 'mask'", exit 6)."""
    from exporter.events.config import EventsConfig, parse_event_filter

    with pytest.raises(exporter.ConfigError) as err:
        EventsConfig(webhook_url="http://127.0.0.1:9/hooks")
    assert str(err.value) == (
        "EventsConfig: a webhook_url needs its webhook_key (the decoded whsec_ secret: "
        "exporter.events.webhook.read_webhook_secret reads a secret file)"
    )
    with pytest.raises(exporter.ConfigError) as err:
        EventsConfig(filters=["status=failed"])  # type: ignore[list-item]
    assert str(err.value) == (
        "EventsConfig: filters are EventFilter values, not 'status=failed': "
        "exporter.events.config.parse_event_filter('status=failed') makes one"
    )
    assert EventsConfig(filters=[parse_event_filter("status=failed")]).filters


_SECRET = "s3cr3t" + "k" * 58  # a key a message must never show, in any form


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        # A bare AttributeError from deep inside ("'NoneType' object has no attribute 'strip'").
        (
            {"data_dir": None},
            "data_dir is None, not a Path or str: a local directory, or an s3://, gs:// or az:// "
            "URL",
        ),
        # A TypeError from the key's regex; the key itself is never in the message.
        (
            {"api_key": _SECRET.encode()},
            "api_key is bytes, not a str (of a bytes key: key.decode())",
        ),
        (
            {"storage_options": None},
            "storage_options is None, not a list of 'KEY=VALUE' strings ([] for none)",
        ),
        # Its characters were the options: "--storage-option without KEY=".
        (
            {"storage_options": "AWS_REGION=eu-west-1"},
            "storage_options is str, not a list of 'KEY=VALUE' strings ([] for none)",
        ),
        # An AttributeError once the run was recorded (left `running`: the next run said killed).
        ({"limits": None}, "limits is None, not an exporter.WalkLimits (left out: the defaults)"),
        ({"events": "events.jsonl"}, "events is str, not an exporter.EventsConfig or None"),
        # Taken: every chunk committed alone; no open operation read at all ("no bound"?).
        ({"commit_rows": -1}, "commit_rows -1 is not 1 or more"),
        ({"max_gets_per_run": -1}, "max_gets_per_run -1 is not 0 or more (None: no bound)"),
        ({"commit_chunks": 0}, "commit_chunks 0 is not 1 or more (None: no bound)"),
        ({"commit_events": "100"}, "commit_events '100' is not an integer"),
        ({"route_max_rps": 0}, "--route-max-rps 0 is not 1 or more"),  # a ZeroDivisionError
    ],
)
def test_a_library_value_of_the_wrong_type_or_range_is_refused_before_anything_is_written(
    tmp_path: Path, setting: dict[str, Any], message: str
) -> None:
    """Values no command line gives: each raised a bare TypeError or AttributeError deep inside
    (some after the run was recorded), or was taken silently. `ConfigError` naming the setting,
    the type given and what it takes, never the value (an API key)."""
    data = tmp_path / "d"
    closed = "http://127.0.0.1:9/api/v2/"  # refuses at once: never a request out if this regresses
    given: dict[str, Any] = {"data_dir": data, "api_key": _SECRET, "base_url": closed, **setting}
    with pytest.raises(exporter.ConfigError) as err:
        exporter.sync(exporter.SyncConfig(**given))
    assert str(err.value) == message
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A dataset of one small sync, for the readers' entry points."""
    from exporter.simulator import SimConfig, Simulator

    sim = Simulator(SimConfig(seed=2207, projects=1, shared_projects=0, orgs=1, days=1)).start()
    try:
        data = tmp_path_factory.mktemp("library") / "d"
        assert run_sync(sim, data).outcome == "ok"
        yield data
    finally:
        sim.stop()


_DATA_DIR = "a Path or str: a local directory, or an s3://, gs:// or az:// URL"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        # A bare TypeError ("datetime - int") once the state was read.
        (
            lambda d: exporter.run_check(d, max_age=7200),
            exporter.ConfigError,
            "max_age is int, not a datetime.timedelta (e.g. timedelta(hours=2))",
        ),
        (
            lambda d: exporter.read_status(None),
            exporter.ConfigError,
            f"data_dir is None, not {_DATA_DIR}",
        ),
        # "'NoneType' object is not iterable"
        (
            lambda d: exporter.connect(None),
            exporter.ConfigError,
            f"data_dir is None, not {_DATA_DIR}; or a list of those",
        ),
        (
            lambda d: exporter.connect(d, storage_options=None),
            exporter.ConfigError,
            "storage_options is None, not a list of 'KEY=VALUE' strings ([] for none)",
        ),
        # "'str' object has no attribute 'tzinfo'": the command line's text, not a datetime.
        (
            lambda d: exporter.build_report(exporter.connect(d), since="7d"),
            ValueError,
            "since is str, not a timezone-aware datetime.datetime or None "
            "(exporter.analytics.report.parse_since('7d') reads --since's text)",
        ),
        # The data directory for the connection: an AttributeError from DuckDB's API.
        (
            lambda d: exporter.build_report(d),
            ValueError,
            "con is PosixPath, not a connection from exporter.connect()",
        ),
    ],
)
def test_a_reader_given_an_argument_of_the_wrong_type_says_which(
    synced: Path, call: Callable[[Path], object], error: type[Exception], message: str
) -> None:
    """`run_check`, `read_status`, `connect` and `build_report` raised a bare TypeError or
    AttributeError from deep inside: the entry point's own error (`ConfigError`; the report's
    `ValueError`, as for `top=0`) naming the argument, the type given and what it takes."""
    with pytest.raises(error) as err:
        call(synced)
    assert type(err.value) is error
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # A TypeError from DuckDB's parser.
        (lambda: exporter.check_read_only(None), "sql is None, not a str of SQL"),
        # "expected string or bytes-like object"
        (
            lambda: exporter.parse_event_filter(None),
            "an event filter is None, not a str such as 'status=failed,error'",
        ),
        # "'NoneType' object is not iterable"
        (
            lambda: exporter.render(["a"], None, "table"),
            "rows is None, not a sequence of rows (con.execute(sql).fetchall())",
        ),
        # --fail-on's text read letter by letter: "'str' object has no attribute 'action'".
        (
            lambda: exporter.run_check("/nonexistent", thresholds="failed>0"),
            "thresholds is str, not a sequence of Threshold "
            "(exporter.ops.check.parse_threshold('stuck > 0') makes one)",
        ),
        (
            lambda: exporter.run_check("/nonexistent", thresholds=["failed>0"]),
            "a threshold is str, not a Threshold "
            "(exporter.ops.check.parse_threshold('stuck > 0') makes one)",
        ),
        # The whsec_ text where the decoded key goes: the delivery's HMAC takes bytes only.
        (
            lambda: exporter.EventsConfig(
                webhook_url="http://127.0.0.1:9/hook", webhook_key="whsec_c2VjcmV0"
            ),
            "webhook_key is str, not bytes (the decoded whsec_ secret: "
            "exporter.events.webhook.read_webhook_secret(path) reads one) or None",
        ),
    ],
)
def test_a_helper_given_an_argument_of_the_wrong_type_says_which(
    call: Callable[[], object], message: str
) -> None:
    """The library's helpers raised a bare TypeError or AttributeError (or, for a webhook key
    given as text, took it): `ConfigError` naming the argument and what it takes, never the
    value (the webhook's secret)."""
    with pytest.raises(exporter.ConfigError) as err:
        call()
    assert str(err.value) == message
    assert "c2VjcmV0" not in str(err.value)


def test_an_events_file_given_as_text_is_its_path() -> None:
    assert exporter.EventsConfig(file="events.jsonl").file == Path("events.jsonl")


def test_the_threshold_a_wrong_type_message_names_is_one_that_parses() -> None:
    """The message for `thresholds` given as text said "parse_threshold('failed>0') makes one":
    that call is refused itself ("'failed>0' is not a threshold"), the fix it gave failed."""
    from exporter.ops.check import Threshold, parse_threshold

    with pytest.raises(exporter.ConfigError) as err:
        exporter.run_check("/nonexistent", thresholds="stuck > 0")
    [example] = re.findall(r"parse_threshold\('([^']*)'\)", str(err.value))
    assert isinstance(parse_threshold(example), Threshold)


def test_values_the_argument_checks_refused_though_they_worked(synced: Path) -> None:
    """The argument checks (check_type) refused what a notebook passes and what worked before
    them: `build_report(top=numpy.int64(3))` (a count from a DataFrame), and `render` of a
    DataFrame's `columns` (a pandas Index) and its `to_numpy()` rows ("columns is Index, not a
    sequence of column names"). Each is read as before; None and text are still refused."""
    import numpy as np
    import pandas as pd

    from exporter.analytics.report_text import render_report

    con = exporter.connect(synced)
    try:
        now = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)  # both reports as of one time
        plain = exporter.build_report(con, top=3, now=now)
        counted = exporter.build_report(con, top=np.int64(3), now=now)
        assert (counted.top, type(counted.top)) == (3, int)
        assert render_report(counted, "table", top=3) == render_report(plain, "table", top=3)
    finally:
        con.close()
    rows = [(1, "x"), (2, "y")]
    frame = pd.DataFrame(rows, columns=["a", "b"])
    for fmt in ("table", "csv", "json", "jsonl", "markdown"):
        expected = exporter.render(["a", "b"], rows, fmt)
        assert exporter.render(frame.columns, frame.to_numpy(), fmt) == expected, fmt
        assert exporter.render(["a", "b"], iter(rows), fmt) == expected, fmt
    with pytest.raises(exporter.ConfigError):
        exporter.render("ab", rows, "csv")
    with pytest.raises(ValueError):
        exporter.build_report(exporter.connect(synced), top=True)


class _NotebookPath:
    """A path type of a notebook's own (py.path, a cloud library's): an `os.PathLike`, not a
    `Path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


class _BytesPath:
    def __fspath__(self) -> bytes:
        return b"/tmp/e.jsonl"


def test_a_notebooks_own_types_are_taken_as_what_they_stand_for(
    make_sim: Any, synced: Path, tmp_path: Path
) -> None:
    """The argument checks refused values outside the annotated types that a notebook passes:
    numpy counts ("--concurrency 2 is not an integer"), a set or a generator of data
    directories, an `os.PathLike` that is not a `Path` (a data directory, an events file), a
    bytearray webhook key. Each is taken as the int, list, Path or bytes it stands for."""
    import numpy as np

    sim = make_sim(seed=2208, projects=2, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    summary = run_sync(
        sim,
        _NotebookPath(data),  # type: ignore[arg-type]
        concurrency=np.int64(2),
        commit_rows=np.int64(7),
        max_requests=np.int64(1000),
        max_gets_per_run=np.int32(50),
        max_rps=np.float32(0),
        time_budget=np.float64(600),
    )
    assert (summary.outcome, summary.exit_code) == ("ok", exporter.ExitCode.OK)
    count = "SELECT count(*), count(DISTINCT id) FROM operations"
    expected = exporter.connect(synced).execute(count).fetchone()
    for given in ({synced}, (d for d in [synced]), (synced,), _NotebookPath(synced)):
        con = exporter.connect(given)  # type: ignore[arg-type]
        try:
            assert con.execute(count).fetchone() == expected
        finally:
            con.close()
    events = exporter.EventsConfig(
        file=_NotebookPath(tmp_path / "e.jsonl"),  # type: ignore[arg-type]
        webhook_url="http://127.0.0.1:9/hooks",
        webhook_key=bytearray(b"k3y"),  # type: ignore[arg-type]
    )
    assert (events.file, events.webhook_key) == (tmp_path / "e.jsonl", b"k3y")
    assert type(events.webhook_key) is bytes
    with pytest.raises(exporter.ConfigError, match=r"^file is _BytesPath, not a Path"):
        exporter.EventsConfig(file=_BytesPath())  # type: ignore[arg-type]
    with pytest.raises(exporter.ConfigError, match=r"^data_dir is bytes"):
        exporter.connect(str(synced).encode())  # type: ignore[arg-type]
    with pytest.raises(exporter.ConfigError, match=r"^--concurrency 2\.5 is not an integer$"):
        run_sync(sim, data, concurrency=np.float64(2.5))
