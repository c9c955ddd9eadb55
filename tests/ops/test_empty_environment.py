"""A variable the command line reads, set but empty (or blank), is a usage error naming it: click
read it as unset, and `OPSAUDIT_DATA_DIR=$DATA opsaudit sync` in a crontab without $DATA
back-filled a new ./opsaudit-data in cron's directory (exit 0) while the real dataset went stale.
Run as cron runs it: the console entry point in a subprocess, in a directory of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import pytest

from .conftest import invoke

ROOT = Path(__file__).resolve().parents[2]

# Every variable an option reads (README's table, less NEON_API_KEY, OPSAUDIT_LEASE_TTL and
# OPSAUDIT_NOTEBOOK_OUT, which no option reads).
OPTION_VARIABLES = {
    "OPSAUDIT_CONFIG",
    "OPSAUDIT_DATA_DIR",
    "OPSAUDIT_BASE_URL",
    "OPSAUDIT_MAX_RPS",
    "OPSAUDIT_TIME_BUDGET",
    "OPSAUDIT_MAX_REQUESTS",
    "OPSAUDIT_REFRESH_OPEN_EVERY",
    "OPSAUDIT_NAMES_MAX_AGE",
    "OPSAUDIT_EVENTS_FILE",
    "OPSAUDIT_WEBHOOK_URL",
    "OPSAUDIT_WEBHOOK_SECRET_FILE",
}


def empty(name: str) -> str:
    return f"Error: {name} is set but empty: give it a value or unset it\n"


def opsaudit(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`opsaudit ARGS` in `cwd` with `env` over an environment without opsaudit's variables."""
    base = {
        k: v for k, v in os.environ.items() if not k.startswith("OPSAUDIT_") and k != "NEON_API_KEY"
    }
    # This checkout first, not by PYTHONPATH: a mutant's copy has a colon in its path.
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from exporter.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs too: a regression's ./opsaudit-data lands in the test's directory."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cron_dir(tmp_path: Path) -> Path:
    where = tmp_path / "cron-cwd"
    where.mkdir()
    return where


@pytest.mark.parametrize("value", ["", "  \t"])
def test_sync_with_an_empty_data_dir_variable_is_refused_and_creates_nothing(
    make_sim: Any, cron_dir: Path, value: str
) -> None:
    """It back-filled the whole account into ./opsaudit-data (exit 0)."""
    sim = make_sim(seed=3, projects=1, shared_projects=0, orgs=1)
    env = {
        "OPSAUDIT_DATA_DIR": value,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
    }
    done = opsaudit(cron_dir, "sync", "--max-rps", "0", env=env)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.endswith(empty("OPSAUDIT_DATA_DIR")), done.stderr
    assert list(cron_dir.iterdir()) == []
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize(
    "command", [["status"], ["query", "SELECT 1"], ["report"], ["check"], ["compact"]]
)
def test_readers_with_an_empty_data_dir_variable_are_refused(
    cron_dir: Path, command: list[str]
) -> None:
    """status said the default directory "does not exist"; a ./opsaudit-data there was read."""
    done = opsaudit(cron_dir, *command, env={"OPSAUDIT_DATA_DIR": ""})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.endswith(empty("OPSAUDIT_DATA_DIR")), done.stderr
    assert list(cron_dir.iterdir()) == []


def test_the_configuration_file_does_not_stand_in_for_an_empty_variable(cron_dir: Path) -> None:
    (cron_dir / "opsaudit.toml").write_text('data_dir = "configured"\n')
    done = opsaudit(cron_dir, "status", env={"OPSAUDIT_DATA_DIR": ""})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.endswith(empty("OPSAUDIT_DATA_DIR")), done.stderr
    assert sorted(p.name for p in cron_dir.iterdir()) == ["opsaudit.toml"]


def test_the_option_wins_over_an_empty_variable(
    make_sim: Any, cron_dir: Path, tmp_path: Path
) -> None:
    sim = make_sim(seed=3, projects=1, shared_projects=0, orgs=1)
    data = tmp_path / "data"
    env = {"OPSAUDIT_DATA_DIR": "", "OPSAUDIT_BASE_URL": "", "NEON_API_KEY": sim.personal_key}
    args = ["--data-dir", str(data), "--base-url", sim.base_url, "--max-rps", "0"]
    done = opsaudit(cron_dir, "sync", *args, env=env)
    assert done.returncode == 0, done.stderr
    assert (data / "state.sqlite").is_file()
    assert list(cron_dir.iterdir()) == []
    status = opsaudit(cron_dir, "status", "--data-dir", str(data), env=env)
    assert status.returncode == 0, status.stderr


def test_an_empty_base_url_variable_is_refused_before_any_request(
    make_sim: Any, cron_dir: Path, tmp_path: Path
) -> None:
    """It fell back to the public API, with the user's real key."""
    sim = make_sim(seed=3, projects=1, shared_projects=0, orgs=1)
    data = tmp_path / "data"
    env = {"OPSAUDIT_BASE_URL": "", "NEON_API_KEY": sim.personal_key}
    for command in (["sync"], ["doctor"]):
        done = opsaudit(cron_dir, *command, "--data-dir", str(data), env=env)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.endswith(empty("OPSAUDIT_BASE_URL")), done.stderr
    assert not data.exists()
    assert list(cron_dir.iterdir()) == []
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize("variable", sorted(OPTION_VARIABLES))
def test_every_option_variable_set_but_empty_is_a_usage_error(
    tmp_path: Path, variable: str
) -> None:
    data = tmp_path / "data"
    env = {
        "NEON_API_KEY": "k" * 64,
        "OPSAUDIT_BASE_URL": "http://127.0.0.1:9/",
        "OPSAUDIT_DATA_DIR": str(data),
        variable: "",
    }
    result = invoke("sync", env=env)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.endswith(empty(variable)), result.stderr
    assert not data.exists()


def test_every_option_with_a_variable_holds_to_the_rule() -> None:
    """The rule is `EnvOption`'s: an option added with a variable and without it would read
    an empty variable as unset again. The group's --config is checked in its callback."""
    from exporter.cli import cli
    from exporter.cli._common import EnvOption
    from exporter.cli._group import COMMANDS

    ctx = click.Context(cli)
    seen = set()
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if param.envvar:
                assert isinstance(param, EnvOption), (name, param.name)
                seen.add(param.envvar)
    [config] = [p for p in cli.params if p.name == "config_file"]
    assert seen | {config.envvar} == OPTION_VARIABLES


def test_an_empty_config_variable_gives_way_to_a_commands_own_config(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "mine.toml"
    config.write_text(f'data_dir = "{tmp_path / "missing"}"\n')
    refused = invoke("status", env={"OPSAUDIT_CONFIG": ""})
    assert (refused.exit_code, refused.stderr.splitlines()[-1]) == (
        2,
        empty("OPSAUDIT_CONFIG").rstrip("\n"),
    )
    result = invoke("status", "--config", str(config), env={"OPSAUDIT_CONFIG": ""})
    assert result.exit_code == 2  # the command's own file was read: its data_dir is missing
    assert f"--data-dir {tmp_path / 'missing'} does not exist" in result.stderr


def test_check_with_an_empty_variable_writes_not_ok(tmp_path: Path) -> None:
    metrics = tmp_path / "check.prom"
    for variable in ("OPSAUDIT_DATA_DIR", "OPSAUDIT_CONFIG"):
        metrics.unlink(missing_ok=True)
        result = invoke("check", "--metrics-file", str(metrics), env={variable: ""})
        assert result.exit_code == 2 and result.stderr.endswith(empty(variable))
        assert "opsaudit_check_ok 0\n" in metrics.read_text()


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_key_variable_is_no_key_and_says_it_is_set(tmp_path: Path, value: str) -> None:
    data = tmp_path / "data"
    message = (
        "no API key: NEON_API_KEY is set but empty: give it the key, or unset it and pass "
        "--api-key-file"
    )
    result = invoke("sync", "--data-dir", str(data), env={"NEON_API_KEY": value})
    assert (result.exit_code, result.stderr) == (3, f"Error: {message}\n")
    assert not data.exists()
    doctor = invoke(
        "doctor",
        "--data-dir",
        str(data),
        "--base-url",
        "http://127.0.0.1:9/",
        env={"NEON_API_KEY": value},
    )
    assert doctor.exit_code == 8
    assert (
        "error key: no API key Fix: NEON_API_KEY is set but empty: give it the key, or unset it "
        "and pass --api-key-file\n"
    ) in doctor.stdout


def test_an_empty_lease_ttl_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from exporter.core.errors import ConfigError
    from exporter.store.lake.store import lease_ttl

    assert lease_ttl() == timedelta(seconds=120)
    monkeypatch.setenv("OPSAUDIT_LEASE_TTL", " ")
    with pytest.raises(ConfigError) as raised:
        lease_ttl()
    assert str(raised.value) == "OPSAUDIT_LEASE_TTL is set but empty: give it a value or unset it"
    assert raised.value.exit_code == 2


def test_shell_completion_with_an_empty_variable_still_completes(cron_dir: Path) -> None:
    """Completion parses resiliently: no usage error (a traceback on Tab) for a variable."""
    env = {
        "OPSAUDIT_DATA_DIR": "",
        "COMP_WORDS": "opsaudit status --for",
        "COMP_CWORD": "2",
        "_OPSAUDIT_COMPLETE": "bash_complete",
    }
    done = opsaudit(cron_dir, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "plain,--format\n", "")


@pytest.mark.parametrize("variable", sorted(OPTION_VARIABLES))
@pytest.mark.parametrize("command", [("sync", "--help"), ("report", "-h"), ("--help",)])
def test_help_is_shown_whatever_variable_is_set_but_empty(
    variable: str, command: tuple[str, ...]
) -> None:
    """`OPSAUDIT_CONFIG= opsaudit sync --help` was exit 2 (the group refused the empty variable
    before the command read --help): help is shown, exit 0, whichever variable is empty."""
    result = invoke(*command, env={variable: ""})
    assert (result.exit_code, result.stderr) == (0, "")
    usage = "opsaudit [OPTIONS] COMMAND" if command == ("--help",) else f"opsaudit {command[0]}"
    assert result.stdout.startswith(f"Usage: {usage} [")


@pytest.mark.parametrize("command", [("sync", "--project", "--help"), ("report", "--since", "-h")])
def test_help_as_an_options_value_leaves_the_empty_config_refused(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`--help` taken as an option's value shows no help: the empty OPSAUDIT_CONFIG the group
    let by for it is refused before the command runs (a sync into ./opsaudit-data, before)."""
    env = {"OPSAUDIT_CONFIG": "", "NEON_API_KEY": "k", "OPSAUDIT_BASE_URL": "http://127.0.0.1:9"}
    result = invoke(*command, env=env)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith(empty("OPSAUDIT_CONFIG"))
    assert list(tmp_path.iterdir()) == []
