"""The README tells the truth: real `--help` text, real set-up commands, every code and variable."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from exporter.core.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


update_readme = _script("update_readme")
check_setup = _script("check_setup_commands")


def test_command_reference_matches_real_help() -> None:
    assert update_readme.render(README) == README, "run python scripts/update_readme.py"


def test_command_reference_covers_every_command() -> None:
    names = update_readme.command_names()
    assert {"sync", "status", "compact", "demo"} <= set(names)
    for name in names:
        assert f"$ opsaudit {name} --help\nUsage: opsaudit {name} " in README, name


def test_setup_commands() -> None:
    demo, tests = check_setup.setup_commands(README)
    assert demo == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && opsaudit demo"
    )
    assert tests == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
        "&& python -m pytest -q"
    )


def test_ci_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # CI runs the README's set-up lines themselves (the test command among them) in fresh
    # copies: the test command is the README's by construction. The first (the demo) runs in
    # the background and CI waits for it.
    # (Byte-compiling every installed module is left to the imports: the commands are the same.)
    assert 'PIP_COMPILE=0 "$PY" scripts/check_setup_commands.py --only 1 >"$demo_log" 2>&1 &' in ci
    assert "PIP_COMPILE=0 python scripts/check_setup_commands.py --only 2" in ci
    assert 'if ! wait "$demo"; then' in ci


def _ci_trap() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    (trap,) = [line for line in lines if line.startswith("trap ") and line.endswith(" EXIT")]
    return trap


@pytest.mark.parametrize(("last_step", "code"), [("true", 0), ("false", 1)])
def test_ci_exit_code_is_its_last_steps(tmp_path: Path, last_step: str, code: int) -> None:
    # CI's EXIT trap runs after the demo was waited for: it must not turn a passing run into
    # a failing one (the trap's kill of a reaped demo failed under `set -e`), nor hide a failure.
    # The same of the mutants, in the background too (and not yet started when a step before
    # them fails).
    logs = [tmp_path / "demo.log", tmp_path / "mutants.log"]
    for mutants in ('mutants=""', 'true &\nmutants=$!\nwait "$mutants"'):
        for log in logs:
            log.write_text("output")
        script = "\n".join(
            [
                "set -euo pipefail",
                f"demo_log={logs[0]}",
                f"mutants_log={logs[1]}",
                "true &",
                "demo=$!",
                _ci_trap(),
                'wait "$demo"',
                mutants,
                last_step,
            ]
        )
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (code, "")
        assert not any(log.exists() for log in logs)


def test_every_exit_code_is_documented() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|", README, re.MULTILINE))
    assert sorted(int(code) for code in rows) == sorted(int(code) for code in ExitCode)


def test_every_environment_variable_is_documented() -> None:
    sources = [p.read_text() for p in (ROOT / "exporter" / "cli").glob("*.py")]
    read = set()
    for text in sources:
        read |= set(re.findall(r"""environ(?:\.get)?[\[(]["']([A-Z_]+)["']""", text))
        read |= set(re.findall(r"""envvar=["']([A-Z_]+)["']""", text))
    read.add("NEON_API_KEY")
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README, re.MULTILINE))
    assert read <= documented
    assert "OPSAUDIT_NOTEBOOK_OUT" in documented


def test_every_view_and_column_is_documented(tmp_path: Path) -> None:
    from exporter.analytics.views import connect, list_views

    con = connect(tmp_path)  # an empty data dir: every view exists and answers 0 rows
    try:
        for name in list_views():
            assert f"`{name}" in README, f"view {name} is not in the README"
            try:
                columns = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
            except Exception:  # a macro, not a view
                continue
            row = re.search(rf"^\| `{name}` \|[^|]*\| (.*) \|$", README, re.MULTILINE)
            if row:  # the report views' table: exactly these columns, in this order
                assert row.group(1) == "`" + ", ".join(columns) + "`", name
            else:  # the base views, described in prose and tables
                for column in columns:
                    assert f"`{column}`" in README or f", {column}" in README, (name, column)
    finally:
        con.close()


# -- Examples no other test runs: the unattended command lines, the settings file, the receiver's
# signature check. Each is read from README.md as printed, so renaming an option or changing the
# signature breaks a test, not a user's crontab.


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


def _opsaudit_commands(line: str) -> list[list[str]]:
    """Every `opsaudit ...` command of a shell line, as argv after `opsaudit` (redirections,
    `;`, `||`, `&&`, `$( )` and comments cut off)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = []
    argv: list[str] | None = None
    skip_target = False
    for token in lexer:
        if skip_target:
            skip_target = False
        elif token == "opsaudit" or token.endswith("/bin/opsaudit"):
            argv = []
            commands.append(argv)
        elif argv is not None and set(token) <= set("();<>|&"):
            if token.startswith((">", "<")):
                if argv and argv[-1].isdigit():  # the `2` of `2>>`
                    argv.pop()
                skip_target = True
            else:
                argv = None
        elif argv is not None:
            argv.append(token)
    return [argv for argv in commands if argv]


def _readme_command_lines(tmp_path: Path) -> list[str]:
    """The README's cron lines, systemd ExecStart= lines and sh blocks, as a shell would run
    them: cron's `\\%` and systemd's `%%` are `%`, `%d` the credentials directory, and the
    paths that must exist for the options to be accepted are files under `tmp_path`."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "key").write_text("key\n")
    (etc / "neon-api-key").write_text("key\n")
    (etc / "whsec").write_text("whsec_" + "A" * 44 + "\n")
    (tmp_path / "textfile").mkdir()
    lines = [line.replace("\\%", "%") for block in _blocks("cron") for line in block.splitlines()]
    for block in _blocks("ini"):
        for line in block.splitlines():
            if line.startswith("ExecStart="):
                lines.append(line.removeprefix("ExecStart=").replace("%%", "%"))
    for block in _blocks("sh"):
        lines += block.replace("\\\n", " ").splitlines()
    swaps = {
        "/etc/opsaudit/": f"{etc}/",
        "%d/": f"{etc}/",
        "/var/lib/node_exporter/textfile": str(tmp_path / "textfile"),
        "/var/lib/opsaudit": str(tmp_path / "data"),
    }
    for old, new in swaps.items():
        lines = [line.replace(old, new) for line in lines]
    return [line for line in lines if "opsaudit" in line and not line.startswith("#")]


def test_every_command_line_of_the_readme_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `opsaudit` command in the cron lines, the systemd units and the sh blocks parses:
    its command and options exist and take the values shown (no command runs)."""
    import warnings

    import click

    from exporter.cli import cli

    monkeypatch.chdir(tmp_path)  # no settings file of the repository's is read
    commands = [
        argv for line in _readme_command_lines(tmp_path) for argv in _opsaudit_commands(line)
    ]
    assert len(commands) >= 15, commands
    seen = set()
    for argv in commands:
        if argv[0].startswith("-") and argv[0] not in ("--config",):
            continue  # `opsaudit -V`
        ctx = cli.make_context("opsaudit", list(argv))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # click 8.2's protected_args
            name, *rest = [*ctx.protected_args, *ctx.args]
        command = cli.get_command(ctx, name)
        assert command is not None, argv
        try:
            command.make_context(name, rest, parent=ctx)
        except click.UsageError as exc:
            pytest.fail(f"README: opsaudit {shlex.join(argv)}: {exc.format_message()}")
        seen.add(name)
    assert {"sync", "check", "query", "report", "doctor", "demo"} <= seen


def test_the_readmes_settings_file_is_accepted(tmp_path: Path) -> None:
    from exporter.cli._config import read_config
    from exporter.core.timeutil import parse_duration
    from exporter.ops.check import parse_threshold

    (example,) = [block for block in _blocks("toml") if block.startswith("data_dir = ")]
    path = tmp_path / "opsaudit.toml"
    path.write_text(example)
    settings = read_config(path)
    assert set(settings) == {"data_dir", "base_url", "max_rps", "fail_on", "max_age"}
    assert [parse_threshold(text).metric for text in settings["fail_on"]] == [
        "stuck",
        "failure_rate",
    ]
    assert parse_duration(settings["max_age"]).total_seconds() == 7200


def test_the_readmes_signature_check_accepts_what_the_webhook_sends() -> None:
    """README's `verify` (Receiving events), run as printed, on opsaudit's signature."""
    import base64
    import time

    from exporter.events.webhook import sign

    (code,) = [block for block in _blocks("python") if "def verify(" in block]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md (verify)", "exec"), namespace)
    verify = namespace["verify"]
    secret = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    key = base64.b64decode(secret.removeprefix("whsec_"))
    body, now = b'{"id": "op-1:1"}', int(time.time())

    def headers(stamp: int, signature: str) -> dict[str, str]:
        return {
            "webhook-id": "op-1:1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature,
        }

    good = sign(key, "op-1:1", now, body)
    assert verify(secret, headers(now, good), body)
    assert verify(secret, headers(now, f"v1,bm90LWl0 {good}"), body)  # one of several
    assert not verify(secret, headers(now, good), body + b" ")
    assert not verify(secret, headers(now, good.replace("v1,", "v2,")), body)
    old = now - 3600
    assert not verify(secret, headers(old, sign(key, "op-1:1", old, body)), body)  # a replay


def test_the_readmes_commands_write_each_metrics_directory_once(tmp_path: Path) -> None:
    """The systemd units gave `sync` and `check` each a --metrics-file in node_exporter's one
    textfile directory: both files carry the trail's series, so node_exporter logged an error
    at every scrape and served the one that sorts first (the check's, up to 15 minutes old)."""
    files = [
        Path(argv[argv.index("--metrics-file") + 1])
        for line in _readme_command_lines(tmp_path)
        for argv in _opsaudit_commands(line)
        if "--metrics-file" in argv
    ]
    assert files  # the README shows one
    assert len({f.parent for f in files}) == len(files), files
