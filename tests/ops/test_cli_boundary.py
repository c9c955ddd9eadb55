"""The CLI boundary: environment variables validated like flags, one error-to-exit-code map,
no read command creating or accepting a missing data directory."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest

from .conftest import invoke

ROOT = Path(__file__).resolve().parents[2]


def test_bad_environment_value_is_a_usage_error_naming_the_variable(tmp_path: Path) -> None:
    result = invoke(
        "sync", "--data-dir", str(tmp_path), env={"OPSAUDIT_MAX_RPS": "fast", "NEON_API_KEY": "k"}
    )
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for '--max-rps' (env var: 'OPSAUDIT_MAX_RPS'): 'fast' is not a "
        "valid float range." in result.stderr
    )
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing started


def test_a_malformed_events_filter_is_refused_without_a_sink_too(tmp_path: Path) -> None:
    """A typo in --events-filter is an error whether or not a sink is given (it was accepted,
    and ignored, without one; refused with one)."""
    result = invoke(
        "sync", "--data-dir", str(tmp_path), "--events-filter", "foo=bar", env={"NEON_API_KEY": "k"}
    )
    assert result.exit_code == 2
    assert "\nError: --events-filter 'foo=bar' is not a filter: write FIELD=V1,V2" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started


def test_event_flags_without_a_sink_warn_that_no_event_is_recorded(
    make_sim: Any, tmp_path: Path
) -> None:
    """They did nothing, silently (a sink's variable unset in the shell that runs it?)."""
    sim = make_sim(seed=4, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=5)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    args = ["sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "0"]
    result = invoke(*args, "--events-filter", "status=failed", "--events-backfill", env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "Warning: --events-filter and --events-backfill without --events-file or --webhook: "
        "no event is recorded\n"
    )
    assert invoke(*args, env=env).stderr == ""


def test_a_webhook_secret_without_a_webhook_warns_that_it_gets_no_events(
    make_sim: Any, tmp_path: Path
) -> None:
    """$OPSAUDIT_WEBHOOK_SECRET_FILE set where $OPSAUDIT_WEBHOOK_URL is not (cron's
    environment): the run's events never reached the webhook's outbox, said nowhere."""
    sim = make_sim(seed=4, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=5)
    secret = tmp_path / "secret"
    secret.write_text("whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=\n")
    env = {
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_WEBHOOK_SECRET_FILE": str(secret),
    }
    args = ["sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "0"]
    alone = invoke(*args, env=env)
    assert alone.exit_code == 0, alone.output
    assert alone.stderr == (
        "Warning: --webhook-secret-file without --events-file or --webhook: no event is recorded\n"
    )
    with_file = invoke(*args, "--events-file", str(tmp_path / "events.jsonl"), env=env)
    assert with_file.exit_code == 0, with_file.output
    assert with_file.stderr == (
        "Warning: --webhook-secret-file without --webhook: no webhook gets this run's events\n"
    )


MAX_RPS = "'--max-rps' (env var: 'OPSAUDIT_MAX_RPS')"


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("--max-rps", "nan", f"{MAX_RPS}: 'nan' is not a finite number"),  # was: no pacing
        ("--max-rps", "inf", f"{MAX_RPS}: 'inf' is not a finite number"),
        ("--max-rps", "1e400", f"{MAX_RPS}: '1e400' is not a finite number"),
        ("--route-max-rps", "nan", "'--route-max-rps': 'nan' is not a finite number"),
        ("--clock-offset", "nan", "'--clock-offset': 'nan' is not a finite number"),  # exit 5
        (
            "--clock-offset",
            "1e300",  # was exit 5, "a bug": its microseconds overflowed SQLite's INTEGER
            "'--clock-offset': 1e+300 is not in the range -1000000000.0<=x<=1000000000.0.",
        ),
    ],
)
def test_a_number_that_is_not_finite_is_a_usage_error(
    tmp_path: Path, option: str, value: str, error: str
) -> None:
    env = {"NEON_API_KEY": "key-of-the-finite-test"}
    unreachable = ["--base-url", "http://127.0.0.1:9/"]  # a sync that started fails fast
    result = invoke("sync", "--data-dir", str(tmp_path), *unreachable, option, value, env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for {error}"
    assert list(tmp_path.iterdir()) == []  # nothing started


def test_environment_variables_are_shown_in_help() -> None:
    text = invoke("sync", "--help").stdout
    for name in ("OPSAUDIT_DATA_DIR", "OPSAUDIT_BASE_URL", "OPSAUDIT_MAX_RPS"):
        assert f"env var: {name}" in " ".join(text.split()), name


def test_max_rps_above_the_account_limit_warns(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=3, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=20)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    result = invoke("sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "20", env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        "Warning: --max-rps 20 is above the account's limit of 700 requests/min (11.67/s), which "
        "the console and every other client share: expect 429s; the sync slows down when it "
        "gets them.\n"
    )
    quiet = invoke("sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "11", env=env)
    assert quiet.exit_code == 0 and "Warning" not in quiet.stderr


def test_an_events_filter_value_the_api_does_not_document_warns(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--events-filter status=faild` kept every event out, for good, without a word (the
    thirteenth review): a value the API does not document is warned about, not refused (its
    values grow), and the run goes on as written."""
    sim = make_sim(seed=4, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=20)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    events = tmp_path / "events.jsonl"
    args = ["sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "0", "--events-file"]
    result = invoke(
        *args, str(events), "--events-backfill", "--events-filter", "status=faild,failed", env=env
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "Warning: --events-filter 'status=faild,failed': faild is not a status the API "
        "documents (scheduling, running, finished, failed, error, cancelling, cancelled, "
        "skipped); a typo there leaves events out for good"
    )
    quiet = invoke(*args, str(events), "--events-filter", "action=start_compute", env=env)
    assert quiet.exit_code == 0 and "Warning" not in quiet.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["compact"],
        ["check"],
        ["report"],
        ["query", "SELECT 1"],
    ],
)
def test_a_missing_data_dir_is_exit_2_and_is_not_created(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "missing"
    result = invoke(*command, "--data-dir", str(missing))
    assert result.exit_code == 2, result.output
    assert f"--data-dir {missing} does not exist" in result.stderr
    assert not missing.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["sync"],
        ["status"],
        ["compact"],
        ["check"],
        ["doctor"],
        ["report"],
        ["query", "SELECT 1"],
        ["demo"],
    ],
)
def test_a_data_dir_that_is_a_file_is_exit_2_for_every_command(
    tmp_path: Path, command: list[str]
) -> None:
    a_file = tmp_path / "data.parquet"
    a_file.write_bytes(b"not a directory")
    result = invoke(*command, "--data-dir", str(a_file), env={"NEON_API_KEY": "k"})
    env_var = "" if command == ["demo"] else " (env var: 'OPSAUDIT_DATA_DIR')"
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.endswith(
        f"Error: Invalid value for '--data-dir'{env_var}: {a_file} is a file, not a directory\n"
    )
    if env_var:  # the demo's --data-dir is never taken from the environment
        env = {"OPSAUDIT_DATA_DIR": str(a_file), "NEON_API_KEY": "k"}
        from_env = invoke(*command, env=env)
        assert from_env.exit_code == 2
        assert f"{a_file} is a file, not a directory" in from_env.stderr
    assert a_file.read_bytes() == b"not a directory"


def test_a_data_dir_that_is_a_file_is_named_so_by_the_library_too(tmp_path: Path) -> None:
    """`exporter.connect`, `read_status` and `run_check` on a file said "does not exist; run
    `opsaudit sync` first" (which would fail on it), where the command line says what it is."""
    import exporter
    from exporter.ops.check import run_check
    from exporter.ops.status import read_status

    a_file = tmp_path / "data.parquet"
    a_file.write_bytes(b"not a directory")
    for call in (exporter.connect, read_status, run_check):
        with pytest.raises(exporter.ConfigError) as error:
            call(a_file)
        assert str(error.value) == f"--data-dir {a_file} is a file, not a directory", call
    assert a_file.read_bytes() == b"not a directory"


def test_a_data_dir_through_a_symlink_loop_is_named_so_by_the_library_too(
    tmp_path: Path,
) -> None:
    """`exporter.sync`, `run_doctor`, `connect`, `read_status` and `run_check` given a path
    through a symbolic link loop raised RuntimeError "Symlink loop from ..." (Path.resolve),
    where the command line says which link loops."""
    import exporter
    from exporter.ops.check import run_check
    from exporter.ops.status import read_status

    (tmp_path / "loop-a").symlink_to("loop-b")
    (tmp_path / "loop-b").symlink_to("loop-a")
    calls: dict[str, Callable[[Path], object]] = {
        "sync": lambda d: exporter.sync(
            exporter.SyncConfig(data_dir=d, api_key="k", base_url="http://127.0.0.1:9/")
        ),
        "run_doctor": lambda d: exporter.run_doctor(d, api_key="k", base_url="http://127.0.0.1:9/"),
        "connect": exporter.connect,
        "read_status": read_status,
        "run_check": run_check,
    }
    for data_dir in (tmp_path / "loop-a", tmp_path / "loop-a" / "sub"):
        for name, call in calls.items():
            with pytest.raises(exporter.ConfigError) as error:
                call(data_dir)
            assert str(error.value) == (
                f"--data-dir {data_dir}: {tmp_path / 'loop-a'} is a symbolic link that loops "
                f"back on itself; {_FIX}"
            ), name


# Every command that takes --data-dir (`opsaudit --help` lists them; simulate takes none).
EVERY_DATA_DIR_COMMAND = [
    ["sync"],
    ["status"],
    ["check"],
    ["doctor"],
    ["report"],
    ["compact"],
    ["query", "SELECT 1"],
    ["query", "-f", "q.sql"],
    ["query", "-f", "-"],
    ["discard-events", "--sink", "file"],
    ["demo"],
]
_FIX = "point --data-dir (or $OPSAUDIT_DATA_DIR) at a directory, or at a path a sync can create"


def _odd_data_dir(kind: str, here: Path) -> tuple[str, str]:
    """A `--data-dir` value no sync can create (made under `here`, the working directory) and
    the usage error every command gives for it."""
    if kind == "under-a-file":
        (here / "afile").write_text("not a directory")
        return "afile/sub", f"afile/sub: afile is a file, not a directory; {_FIX}"
    if kind == "symlink-loop":
        (here / "loop-a").symlink_to("loop-b")
        (here / "loop-b").symlink_to("loop-a")
        return (
            "loop-a/sub",
            f"loop-a/sub: loop-a is a symbolic link that loops back on itself; {_FIX}",
        )
    if kind == "dangling-symlink":
        (here / "gone").symlink_to(here / "nowhere")
        return "gone", (
            f"gone: gone is a symbolic link to {here / 'nowhere'}, which does not exist; create "
            f"{here / 'nowhere'}, or {_FIX}"
        )
    if kind == "trailing-newline":
        return "data\n", "'data\\n' holds a control character (a line break?); remove it"
    if kind == "tilde":
        return "~/audit", (
            f"~/audit: '~' is not expanded here (a shell expands it only unquoted); write "
            f"{here / 'home'}/audit, or ./~/audit for a folder named '~'"
        )
    if kind == "name-too-long":
        name = "a" * 300
        return (
            name,
            f"{name[:60]}...{name[-40:]}: a name in it is 300 bytes, too long; use a shorter one",
        )
    assert kind == "path-too-long"
    path = "/".join(["b" * 200] * 25)
    return path, f"{path[:60]}...{path[-40:]}: the path is 5024 bytes, too long; use a shorter one"


@pytest.mark.parametrize(
    "kind",
    [
        "under-a-file",
        "symlink-loop",
        "dangling-symlink",
        "trailing-newline",
        "tilde",
        "name-too-long",
        "path-too-long",
    ],
)
@pytest.mark.parametrize("command", EVERY_DATA_DIR_COMMAND, ids=" ".join)
def test_a_data_dir_no_sync_can_create_is_one_usage_error_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], kind: str
) -> None:
    """`afile/sub` (afile a file) was exit 6 for sync and demo ("cannot write ... Not a
    directory"), 8 for doctor, 2 elsewhere with "does not exist; run `opsaudit sync` first"
    (which then failed); a symlink loop or an over-long name was "unexpected error ... a bug",
    exit 5; a trailing newline or a quoted '~' made a directory no one meant, exit 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.sql").write_text("SELECT 1")
    value, message = _odd_data_dir(kind, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {"NEON_API_KEY": "k", "HOME": str(tmp_path / "home")}
    # --data-dir first: click opens `-f q.sql` as it meets it and, on a usage error after,
    # leaves it to the garbage collector (a ResourceWarning, an error under pytest).
    result = invoke(command[0], "--data-dir", value, *command[1:], env=env)
    env_var = "" if command == ["demo"] else " (env var: 'OPSAUDIT_DATA_DIR')"
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.endswith(f"Error: Invalid value for '--data-dir'{env_var}: {message}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created
    if env_var and "q.sql" not in command:  # an environment variable is read last
        from_env = invoke(*command, env={**env, "OPSAUDIT_DATA_DIR": value})
        assert (from_env.exit_code, from_env.stderr) == (result.exit_code, result.stderr)


def test_a_data_dir_under_a_file_is_named_so_by_the_library_too(tmp_path: Path) -> None:
    """`exporter.connect` said "does not exist; run `opsaudit sync` first" (which fails)."""
    import exporter

    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(exporter.ConfigError) as error:
        exporter.connect(tmp_path / "afile" / "sub")
    assert str(error.value) == (
        f"--data-dir {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} is a file, not a "
        f"directory; {_FIX}"
    )


@pytest.mark.parametrize("command", [["report"], ["query", "SELECT 1"]])
def test_a_directory_that_is_not_a_dataset_is_exit_2(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("a home directory, say")
    result = invoke(*command, "--data-dir", str(tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        f"Error: --data-dir {tmp_path} is not an opsaudit dataset (no state.sqlite or "
        "operation_versions/ in it); point --data-dir (or $OPSAUDIT_DATA_DIR) at the directory "
        "`opsaudit sync` writes\n",
    )
    (tmp_path / "notes.txt").unlink()
    empty = invoke(*command, "--data-dir", str(tmp_path))  # empty: an empty dataset
    assert empty.exit_code == 0, empty.output


def test_compact_on_an_empty_directory_creates_nothing(tmp_path: Path) -> None:
    result = invoke("compact", "--data-dir", str(tmp_path))
    assert result.exit_code == 6
    assert result.stderr == f"Error: no dataset in {tmp_path} yet: run `opsaudit sync` first\n"
    assert list(tmp_path.iterdir()) == []


def test_status_renders_through_format(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=4, projects=2, shared_projects=0, orgs=1, ops_per_project_per_day=30)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    assert invoke("sync", "--data-dir", str(tmp_path), "--max-rps", "0", env=env).exit_code == 0
    as_json = invoke("status", "--data-dir", str(tmp_path), "--format", "json").stdout
    lag = json.loads(as_json)["coverage"]["oldest_lag_seconds"]
    table = invoke("status", "--data-dir", str(tmp_path))
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    # Read a moment later than the json: its lag may have crossed into the next second.
    assert lines[0] in [
        "coverage: 2 projects, 100% walked within the hour, 100% within the day; oldest lag "
        f"{seconds}s; 0 open operation(s) not re-read for a day"
        for seconds in (lag, lag + 1)
    ]
    lines = lines[2:]
    assert lines[0].split() == [
        "id",
        "name",
        "checkpoint_at",
        "last_synced_at",
        "current_at",
        "open_operations",
        "lag_seconds",
        "deleted",
        "last_error",
    ]
    assert "(2 rows)" in lines and "(1 row)" in lines
    out = tmp_path / "status.json"
    written = invoke("status", "--data-dir", str(tmp_path), "--format", "json", "-o", str(out))
    assert (written.exit_code, written.stdout) == (0, "")
    status = json.loads(out.read_text())
    assert sorted(p["id"] for p in status["projects"]) == sorted(sim.project_ids())
    assert [r["outcome"] for r in status["runs"]] == ["ok"]
    assert status["runs"][0]["finished_at"].endswith("Z")


def test_help_summaries_are_short_and_lead_with_what_the_command_does() -> None:
    listing = invoke("--help").stdout.split("Commands:\n", 1)[1]
    assert listing == (
        "  check           Find what needs attention (exit 8, one line each).\n"
        "  compact         Merge small data files into fewer, larger ones.\n"
        "  demo            Sync a simulated account and print the report.\n"
        "  discard-events  Drop the events waiting for a sink no longer used.\n"
        "  doctor          Check the set-up and say what to fix.\n"
        "  query           Run one SQL statement over the views.\n"
        "  report          What is failing or stuck now, and the trends.\n"
        "  simulate        Serve a simulated API on 127.0.0.1 until Ctrl-C.\n"
        "  status          Per project: checkpoint, lag, open operations.\n"
        "  sync            Export new and changed operations to the dataset.\n"
    )
    assert all(len(line.split(None, 1)[1]) < 55 for line in listing.splitlines())


def test_version_has_a_short_flag() -> None:
    long, short = invoke("--version"), invoke("-V")
    assert (short.exit_code, short.stdout) == (0, long.stdout)
    assert short.stdout.startswith("opsaudit, version ")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        # Near a hidden option (--clock-offset) and a visible one: only the visible one.
        (["sync", "--log-fmt", "json"], "No such option '--log-fmt'. Did you mean '--log-format'?"),
        # Near a hidden option alone: no suggestion at all.
        (["sync", "--clock-ofset", "1"], "No such option '--clock-ofset'."),
        (
            ["sync", "--webhook-timout", "1"],
            "No such option '--webhook-timout'. "
            "(Did you mean one of: '--webhook', '--webhook-secret-file'?)",
        ),
        # Near visible options: suggested as before, the group's own too.
        (["sync", "--data-dri", "d"], "No such option '--data-dri'. Did you mean '--data-dir'?"),
        (["--vrsion"], "No such option '--vrsion'. Did you mean '--version'?"),
    ],
)
def test_a_mistyped_option_is_never_told_a_hidden_one(args: list[str], error: str) -> None:
    """click's "Did you mean" drew from every option, hidden ones too: `sync --log-fmt` was
    "Did you mean one of: '--clock-offset', '--log-format'?", a test-only option."""
    result = invoke(*args)
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (2, f"Error: {error}")
    assert "--clock-offset" not in invoke("sync", "--help").stdout


def test_quiet_sync_prints_nothing_but_what_went_wrong(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=5, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=20)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    ok = invoke("sync", "--data-dir", str(tmp_path / "d"), "-q", "--max-rps", "0", env=env)
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, "", "")
    loud = invoke("sync", "--data-dir", str(tmp_path / "d"), "--max-rps", "0", env=env)
    assert loud.stdout.startswith("sync ok: 1/1 projects")
    revoked = {**env, "NEON_API_KEY": "not-a-key"}
    failed = invoke("sync", "--data-dir", str(tmp_path / "d"), "--quiet", env=revoked)
    assert (failed.exit_code, failed.stdout) == (3, "")
    assert failed.stderr.startswith("Error: ")


def test_no_rate_figure_for_a_run_under_a_second() -> None:
    import datetime as dt

    from exporter.engine.sync import Outcome, RunSummary

    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    fast = RunSummary("r", start, start + dt.timedelta(seconds=0.4), Outcome.OK)
    fast.configured_rps, fast.achieved_rps = 8.0, 37.5
    assert "req/s" not in fast.line()
    fast.finished_at = start + dt.timedelta(seconds=2)
    assert fast.line().endswith("; 37.5 req/s of 8 configured")


def test_json_logs_end_with_a_json_error_line(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=6, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=20)
    env = {"NEON_API_KEY": "revoked", "OPSAUDIT_BASE_URL": sim.base_url}
    data_dir = str(tmp_path / "d")
    rejected = invoke("sync", "--data-dir", data_dir, "--log-format", "json", env=env)
    assert rejected.exit_code == 3
    lines = [json.loads(line) for line in rejected.stderr.splitlines()]  # every line is JSON
    assert lines[-1]["level"] == "error" and lines[-1]["exit_code"] == 3
    assert json.loads(rejected.stdout)["event"] == "summary"
    # NEON_API_KEY unset (tests/conftest.py); set but empty: test_empty_environment.py
    missing = invoke("sync", "--data-dir", data_dir, "--log-format", "json")
    assert missing.exit_code == 3
    last = json.loads(missing.stderr.splitlines()[-1])
    assert (last["level"], last["exit_code"], last["message"]) == (
        "error",
        3,
        "no API key: set NEON_API_KEY or pass --api-key-file (create one in the console under "
        "account or organization settings)",
    )
    text = invoke("sync", "--data-dir", data_dir)
    assert text.stderr.startswith("Error: no API key: ")


def test_shell_completion_as_the_readme_documents_it() -> None:
    import os
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert 'eval "$(_OPSAUDIT_COMPLETE=bash_source opsaudit)"' in readme
    env = {**os.environ, "COMP_WORDS": "opsaudit rep", "COMP_CWORD": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "from exporter.cli import main; main()"],
        env={**env, "_OPSAUDIT_COMPLETE": "bash_complete"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == "plain,report\n", done.stderr


def test_text_logs_carry_the_facts_json_logs_carry(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=8, projects=1, shared_projects=0, orgs=1, ops_per_project_per_day=20)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    text = invoke("sync", "--data-dir", str(tmp_path / "t"), "-v", "--max-rps", "0", env=env)
    as_json = invoke(
        "sync", "--data-dir", str(tmp_path / "j"), "--log-format", "json", "--max-rps", "0", env=env
    )
    assert text.exit_code == as_json.exit_code == 0
    done = next(
        json.loads(line) for line in as_json.stderr.splitlines() if '"project_done"' in line
    )
    line = next(line for line in text.stderr.splitlines() if "project_done" in line)
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO opsaudit\.events: project_done "
        rf"project_id={done['project_id']} new={done['new']} changed=0 rate=\S+",
        line,
    ), line


@pytest.mark.parametrize("where", ["opsaudit.toml", "pyproject.toml"])
def test_help_shows_a_configured_url_default_without_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """--help printed the file's base_url and data_dir as written: a proxy's password and a
    query token under every command."""
    monkeypatch.chdir(tmp_path)
    table = "[tool.opsaudit]\n" if where == "pyproject.toml" else ""
    (tmp_path / where).write_text(
        f"{table}base_url = "
        '"https://u:HookPassw0rd@proxy.example.com/api/v2?token=QueryT0kenSecret"\n'
        'data_dir = "s3://AKID:Stor3Secret@bucket/prefix?sig=Sig0Secret#frag"\n'
    )
    help_text = " ".join(invoke("sync", "--help").stdout.split())  # unwrapped
    assert "default: https://proxy.example.com/api/v2]" in help_text
    assert "default: s3://bucket/prefix]" in help_text
    for secret in ("HookPassw0rd", "QueryT0kenSecret", "Stor3Secret", "Sig0Secret", "frag"):
        assert secret not in help_text


def test_a_config_file_sets_defaults_and_flags_and_environment_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .conftest import analytics_dataset

    analytics_dataset(tmp_path / "full")  # 12 operations
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "opsaudit.toml").write_text(
        'data_dir = "full"\nfail_on = ["stuck(start_compute) > 0 over 5h"]\n'
    )
    sql = "SELECT count(*) AS n FROM operations"

    def count(*args: str, env: dict[str, str] | None = None) -> str:
        result = invoke("query", "--format", "csv", *args, sql, env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    assert count() == "n\n12\n"  # from the file
    assert count("--data-dir", "empty") == "n\n0\n"  # a flag wins
    assert count(env={"OPSAUDIT_DATA_DIR": "empty"}) == "n\n0\n"  # and so does the environment
    check = invoke("check", "--as-of", "2025-01-12T14:00:00Z")
    assert check.exit_code == 8
    assert check.stdout.splitlines()[-1] == (
        "threshold: 2 operation(s) of start_compute created in the last 5h not terminal 1h after "
        "creation (stuck(start_compute) > 0 over 5h)"
    )
    # [tool.opsaudit] in pyproject.toml when there is no opsaudit.toml; --config names a file.
    (tmp_path / "opsaudit.toml").unlink()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.opsaudit]\ndata_dir = "empty"\n'
    )
    assert count() == "n\n0\n"
    (tmp_path / "other.toml").write_text('data_dir = "full"\n')
    assert count(env={"OPSAUDIT_CONFIG": "other.toml"}) == "n\n12\n"
    assert invoke("--config", "other.toml", "query", "--format", "csv", sql).stdout == "n\n12\n"


def test_config_after_the_command_as_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`opsaudit query --config FILE` (a new user's first try) reads FILE as `opsaudit --config
    FILE query` does; after the command it wins over the file before it, and flags over both."""
    from .conftest import analytics_dataset

    analytics_dataset(tmp_path / "full")  # 12 operations
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "full.toml").write_text('data_dir = "full"\n')
    (tmp_path / "empty.toml").write_text('data_dir = "empty"\nmax_age = "1h"\n')
    sql = "SELECT count(*) AS n FROM operations"

    def count(*args: str) -> str:
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    assert count("query", "--config", "full.toml", "--format", "csv", sql) == "n\n12\n"
    assert count("query", "--format", "csv", "--config", "full.toml", sql) == "n\n12\n"
    both = ("--config", "empty.toml", "query", "--config", "full.toml", "--format", "csv", sql)
    assert count(*both) == "n\n12\n"
    flag = ("query", "--config", "full.toml", "--data-dir", "empty", "--format", "csv", sql)
    assert count(*flag) == "n\n0\n"
    missing = invoke("status", "--config", "nowhere.toml")
    assert (missing.exit_code, missing.stdout) == (2, "")
    assert "Invalid value for '--config': nowhere.toml does not exist" in missing.stderr
    (tmp_path / "bad.toml").write_text('data-dir = "typo"\n')
    typo = invoke("check", "--config", "bad.toml")
    assert (typo.exit_code, typo.stderr) == (
        2,
        "Error: unknown setting data-dir in bad.toml; known: data_dir, base_url, max_rps, "
        "fail_on, max_age\n",
    )
    assert "--config" in invoke("sync", "--help").stdout
    assert "--config" not in invoke("demo", "--help").stdout  # the demo reads no settings
    # The file named after the command is the one read: a broken one in the directory failed
    # the run that names another (as `opsaudit --config FILE query` never read it).
    (tmp_path / "opsaudit.toml").write_text("data_dir = \n")
    assert count("query", "--config", "full.toml", "--format", "csv", sql) == "n\n12\n"
    assert count("query", "--config=full.toml", "--format", "csv", sql) == "n\n12\n"
    broken = invoke("query", "--format", "csv", sql)
    assert broken.exit_code == 2 and "is not valid TOML" in broken.stderr


def test_a_commands_own_config_wins_over_opsaudit_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$OPSAUDIT_CONFIG naming a file that is missing, broken or a directory failed a command
    given its own `--config GOOD` (exit 2): the variable is the default of the group's --config
    and was read before the command's. An option wins over its variable: the bad value is not
    read at all; without the command's --config it is still refused, naming the variable."""
    from .conftest import analytics_dataset

    analytics_dataset(tmp_path / "full")  # 12 operations
    monkeypatch.chdir(tmp_path)
    (tmp_path / "full.toml").write_text('data_dir = "full"\n')
    (tmp_path / "broken.toml").write_text("data_dir = \n")
    sql = "SELECT count(*) AS n FROM operations"
    refused = {
        "nowhere.toml": "nowhere.toml does not exist",
        "broken.toml": "Error: broken.toml is not valid TOML",
        str(tmp_path): f"File {str(tmp_path)!r} is a directory.",
    }
    for bad, says in refused.items():
        env = {"OPSAUDIT_CONFIG": bad}
        good = invoke("query", "--config", "full.toml", "--format", "csv", sql, env=env)
        assert (good.exit_code, good.stdout, good.stderr) == (0, "n\n12\n", ""), bad
        alone = invoke("query", "--format", "csv", sql, env=env)
        assert (alone.exit_code, alone.stdout) == (2, ""), bad
        assert says in alone.stderr, alone.stderr
        if bad != "broken.toml":
            assert "Invalid value for '--config' (env var: 'OPSAUDIT_CONFIG')" in alone.stderr


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        (
            "max_rps = 2000-01-01",
            "max_rps in {} must be a number (requests per second), not a date or time",
        ),
        (
            "max_rps = true",
            "max_rps in {} must be a number (requests per second), not the boolean true",
        ),
        ("max_rps = {a = 1}", "max_rps in {} must be a number (requests per second), not a table"),
        (
            'data_dir = ["a", "b"]',
            "data_dir in {} must be text (one directory or URL), not an array",
        ),
        ("base_url = 7", "base_url in {} must be text (a URL), not the number 7"),
        (
            "fail_on = [1]",
            "fail_on in {} must be text or an array of texts (thresholds), not an array",
        ),
        ("max_age = 2", 'max_age in {} must be text (a duration: "2h"), not the number 2'),
    ],
)
def test_a_setting_of_the_wrong_kind_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, says: str
) -> None:
    """`max_rps = true` ran at 1 request a second, an array made a directory named
    "['a', 'b']", a date failed as "a bug" (exit 5)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "opsaudit.toml").write_text(setting + "\n")
    result = invoke("sync", "--data-dir", "d", env={"NEON_API_KEY": "unused"})
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"Error: {says.format(tmp_path / 'opsaudit.toml')}\n"
    assert list(tmp_path.iterdir()) == [tmp_path / "opsaudit.toml"]


@pytest.mark.parametrize(
    ("setting", "command", "says"),
    [
        ("max_rps = -5", "sync", "-5.0 is not in the range x>=0."),
        ('data_dir = ""', "status", "is empty"),
        ('max_age = "soon"', "check", "'soon' is not a duration: use a number and s, m, h, d"),
        ('fail_on = "stuck > x"', "check", "'stuck > x' is not a threshold"),
        ('base_url = "ftp://x"', "sync", "'ftp://x' is not an http(s) URL"),
    ],
)
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_refused_setting_names_the_file_not_the_flag(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    command: str,
    says: str,
    where: str,
) -> None:
    """A value of the right kind that the option refuses (`max_rps = -5`) was blamed on the
    option and its environment variable ("Invalid value for '--max-rps' (env var:
    'OPSAUDIT_MAX_RPS')"), which the user never set: the message names the setting and the
    file, whichever way the file is found or named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "opsaudit.toml").write_text(setting + "\n")
    key = setting.split(" ")[0]
    args = [command] if where == "before" else [command, "--config", "opsaudit.toml"]
    if command == "sync":
        args += ["--data-dir", "d"]
    result = invoke(*args, env={"NEON_API_KEY": "unused"})
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    named = tmp_path / "opsaudit.toml" if where == "before" else Path("opsaudit.toml")
    error = result.stderr.splitlines()[-1]
    assert error.startswith(f"Error: Invalid value for {key} in {named}: {says}"), error
    assert "--" not in error.split(":", 2)[1] and "env var" not in error, error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opsaudit.toml"]
    # Set by the flag or the environment, the same value is still blamed on them.
    flag = {"max_rps": "--max-rps", "data_dir": "--data-dir", "max_age": "--max-age"}
    if key in flag:
        value = setting.split(" = ")[1].strip('"')
        by_flag = invoke(command, flag[key], value, env={"NEON_API_KEY": "unused"})
        assert by_flag.exit_code == 2 and f"for '{flag[key]}'" in by_flag.stderr


def test_a_bad_config_file_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "opsaudit.toml").write_text('data_dir = "d"\ndata-dir = "typo"\n')
    result = invoke("status")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: unknown setting data-dir in {tmp_path / 'opsaudit.toml'}; known: data_dir, "
        "base_url, max_rps, fail_on, max_age\n"
    )
    (tmp_path / "opsaudit.toml").write_text("data_dir = \n")
    broken = invoke("status")
    assert broken.exit_code == 2
    assert broken.stderr.startswith(f"Error: {tmp_path / 'opsaudit.toml'} is not valid TOML: ")
    # The demo and the simulator read no settings (README): a broken file, or one
    # OPSAUDIT_CONFIG names that is not there, stops neither them nor their help.
    for env in ({}, {"OPSAUDIT_CONFIG": str(tmp_path / "nowhere.toml")}):
        for command in ("demo", "simulate"):
            shown = invoke(command, "--help", env=env)
            assert (shown.exit_code, shown.stderr) == (0, ""), shown.output
            assert shown.stdout.startswith(f"Usage: opsaudit {command} [OPTIONS]")


def test_help_lists_every_command_without_importing_one() -> None:
    """`opsaudit --help` lists the commands from `_group.COMMANDS` (start-up: PRODUCT.md,
    `--help` <= 80 ms); each listed line is the command's own short help, and every command
    module stays unimported."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from exporter.cli import cli\n"
        "out = CliRunner().invoke(cli, ['--help']).output\n"
        "print(sorted(m for m in sys.modules if m.startswith('exporter.cli.')))\n"
        "print(out.split('Commands:')[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    modules, listing = done.stdout.split("\n", 1)
    assert modules == "['exporter.cli._common', 'exporter.cli._group']"
    from exporter.cli import cli
    from exporter.cli._group import COMMANDS

    ctx = click.Context(cli)
    lines = [line.split(None, 1) for line in listing.strip().splitlines()]
    assert [name for name, _ in lines] == sorted(COMMANDS)
    for name, text in lines:
        command = cli.get_command(ctx, name)
        assert command is not None and command.get_short_help_str(200) == text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sync", "--project", ""], "Invalid value for '--project': an empty id"),
        (["sync", "--org-id", "  "], "Invalid value for '--org-id': an empty id"),
        (["sync", "--project", " p-1"], "Invalid value for '--project': ' p-1' has spaces"),
        (["report", "--project", ""], "Invalid value for '--project': an empty id"),
    ],
)
def test_an_empty_id_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    """`--project ''` was walked: a 404, exit 1 under the label `discovery`, and a project
    with an empty id in the state until a full-account run forgot it."""
    data_dir = tmp_path / "d"
    result = invoke(*args, "--data-dir", str(data_dir), env={"NEON_API_KEY": "k" * 64})
    assert (result.exit_code, result.stdout) == (2, "")
    assert message in result.stderr
    assert not data_dir.exists()
