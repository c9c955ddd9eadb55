"""`--metrics-file`: Prometheus textfile output, read back with the official parser."""

from __future__ import annotations

import ast
import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.ops.metrics import Metric, check_metrics, render_metrics, write_metrics

from .conftest import at_us, invoke, iso, state_rows

TERMINAL = ("finished", "cancelled", "skipped")


def parse(path: Path) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Family name -> {sorted labels: value}, as node_exporter would read the file."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_sync_metrics_file(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=9, projects=3, shared_projects=0, orgs=1)
    data_dir, prom = tmp_path / "data", tmp_path / "textfile" / "opsaudit.prom"
    prom.parent.mkdir()
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    result = invoke(
        "sync", "--data-dir", str(data_dir), "--max-rps", "0", "--metrics-file", str(prom), env=env
    )
    assert result.exit_code == 0, result.output
    [run] = state_rows(
        data_dir,
        "SELECT started_us, finished_us, requests, responses_429, retries FROM runs",
    )
    truth = sim.ground_truth()
    metrics = parse(prom)
    assert metrics["opsaudit_last_success_timestamp_seconds"] == {(): run[1] / 1e6}
    assert metrics["opsaudit_last_run_timestamp_seconds"] == {(): run[1] / 1e6}
    assert metrics["opsaudit_last_run_duration_seconds"] == {(): (run[1] - run[0]) / 1e6}
    assert metrics["opsaudit_last_run_requests"] == {(): run[2]}
    assert run[2] >= 4  # organizations, projects, one page per project at least
    assert metrics["opsaudit_last_run_responses_429"] == {(): 0}
    assert metrics["opsaudit_last_run_retries"] == {(): 0}
    assert metrics["opsaudit_last_run_operations"] == {
        (("kind", "new"),): len(truth),
        (("kind", "changed"),): 0,
    }
    assert metrics["opsaudit_last_run_projects"] == {
        (("result", "ok"),): 3,
        (("result", "failed"),): 0,
    }
    assert metrics["opsaudit_last_run_outcome"][(("outcome", "ok"),)] == 1
    assert sum(metrics["opsaudit_last_run_outcome"].values()) == 1
    assert metrics["opsaudit_open_operations"] == {
        (): sum(op["status"] not in TERMINAL for op in truth.values())
    }
    assert metrics["opsaudit_projects"] == {(): 3}
    # Nothing left behind but the file (node_exporter reads every *.prom in the directory).
    assert [p.name for p in prom.parent.iterdir()] == ["opsaudit.prom"]
    assert prom.stat().st_mode & 0o777 == 0o644


def test_check_metrics_file_failures_per_action(make_sim: Any, tmp_path: Path) -> None:
    # A history that ends now, so the last 24 h hold operations and the run is recent.
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sim = make_sim(seed=10, projects=2, shared_projects=0, orgs=1, days=2, start=now)
    data_dir, prom = tmp_path / "data", tmp_path / "opsaudit.prom"
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    assert invoke("sync", "--data-dir", str(data_dir), "--max-rps", "0", env=env).exit_code == 0
    prom.write_text("stale content\n")
    inode = prom.stat().st_ino
    [(finished,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    as_of = at_us(finished) + dt.timedelta(minutes=1)
    result = invoke(
        "check", "--data-dir", str(data_dir), "--as-of", iso(as_of), "--metrics-file", str(prom)
    )
    assert result.exit_code == 0, result.output
    assert prom.stat().st_ino != inode  # replaced by rename, not rewritten in place
    since = as_of - dt.timedelta(hours=24)
    operations: dict[str, int] = {}
    failed: dict[str, int] = {}
    for op in sim.ground_truth().values():
        created = dt.datetime.fromisoformat(op["created_at"].replace("Z", "+00:00"))
        if since <= created < as_of:
            operations[op["action"]] = operations.get(op["action"], 0) + 1
            failed[op["action"]] = failed.get(op["action"], 0) + (op["failures_count"] > 0)
    assert sum(failed.values()) > 0  # the simulator's history has failures
    metrics = parse(prom)
    assert metrics["opsaudit_operations_24h"] == {
        (("action", a),): n for a, n in operations.items()
    }
    assert metrics["opsaudit_failed_operations_24h"] == {
        (("action", a),): n for a, n in failed.items()
    }
    assert metrics["opsaudit_check_ok"] == {(): 1}
    assert metrics["opsaudit_check_timestamp_seconds"] == {(): as_of.timestamp()}
    # A 0 for every kind of finding (README's table), so an alert sees 0, never an absent series.
    assert metrics["opsaudit_check_findings"] == {
        (("check", kind),): 0
        for kind in (
            "stale_sync",
            "last_run_failed",
            "project_not_synced",
            "project_error",
            "names_not_read",
            "open_not_reread",
            "retention_gap",
            "retention_coverage",
            "threshold",
            "events_backlog",
        )
    }
    assert metrics["opsaudit_last_success_timestamp_seconds"] == {(): at_us(finished).timestamp()}


def test_check_metrics_count_findings(tmp_path: Path) -> None:
    data_dir, prom = tmp_path / "data", tmp_path / "check.prom"
    data_dir.mkdir()
    result = invoke("check", "--data-dir", str(data_dir), "--metrics-file", str(prom))
    assert result.exit_code == 8
    metrics = parse(prom)
    assert metrics["opsaudit_check_ok"] == {(): 0}
    assert metrics["opsaudit_check_findings"][(("check", "stale_sync"),)] == 1
    # No state yet: no run metrics, and no invented zeros.
    assert "opsaudit_last_success_timestamp_seconds" not in metrics


def _synced_once(make_sim: Any, tmp_path: Path) -> tuple[Path, Path, dt.datetime]:
    """A dataset synced once, the metrics file's path, and a minute after the run as of."""
    sim = make_sim(seed=11, projects=1, shared_projects=0, orgs=1)
    data_dir, prom = tmp_path / "data", tmp_path / "check.prom"
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    assert invoke("sync", "--data-dir", str(data_dir), "--max-rps", "0", env=env).exit_code == 0
    [(finished,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    return data_dir, prom, at_us(finished) + dt.timedelta(minutes=1)


def test_a_check_that_cannot_judge_writes_not_ok(make_sim: Any, tmp_path: Path) -> None:
    """A damaged state (exit 6) or a data directory gone (exit 2) left the last verdict in the
    file (`opsaudit_check_ok 1`): README's alert on `opsaudit_check_ok == 0` never fired. The
    file now says 0, as of the check, and no findings (none are known)."""
    data_dir, prom, as_of = _synced_once(make_sim, tmp_path)
    args = ["check", "--data-dir", str(data_dir), "--metrics-file", str(prom), "--as-of"]
    assert invoke(*args, iso(as_of)).exit_code == 0
    assert parse(prom)["opsaudit_check_ok"] == {(): 1}
    (data_dir / "state.sqlite").write_bytes(b"garbage")
    for name in ("state.sqlite-wal", "state.sqlite-shm"):
        (data_dir / name).unlink(missing_ok=True)

    def not_ok(when: dt.datetime) -> Any:
        return {
            "opsaudit_check_ok": {(): 0},
            "opsaudit_check_timestamp_seconds": {(): when.timestamp()},
        }

    later = as_of + dt.timedelta(minutes=1)
    assert (invoke(*args, iso(later)).exit_code, parse(prom)) == (6, not_ok(later))
    shutil.rmtree(data_dir)
    later += dt.timedelta(minutes=1)
    assert (invoke(*args, iso(later)).exit_code, parse(prom)) == (2, not_ok(later))


def test_a_check_refused_for_its_options_writes_not_ok(make_sim: Any, tmp_path: Path) -> None:
    """A usage error click met while reading check's options (a bad --fail-on or --max-age, an
    unknown option, a --config after the command that cannot be read) ended check before its
    body ran: `opsaudit_check_ok 1` stood in the file. It now says 0, as of --as-of when that
    could be read, now otherwise; a --metrics-file that is itself refused is left alone."""
    data_dir, prom, as_of = _synced_once(make_sim, tmp_path)
    args = ["check", "--data-dir", str(data_dir), "--metrics-file", str(prom)]
    ok = {"opsaudit_check_ok": {(): 1}}
    for n, bad in enumerate(
        (
            ["--fail-on", "stuck >"],
            ["--max-age", "soon"],
            ["--no-such-option"],
            ["--config", str(tmp_path / "missing.toml")],
        )
    ):
        assert invoke(*args, "--as-of", iso(as_of)).exit_code == 0
        assert {"opsaudit_check_ok": parse(prom)["opsaudit_check_ok"]} == ok
        later = as_of + dt.timedelta(minutes=n + 1)
        result = invoke(*args, *bad, "--as-of", iso(later))
        assert (result.exit_code, parse(prom)) == (
            2,
            {
                "opsaudit_check_ok": {(): 0},
                "opsaudit_check_timestamp_seconds": {(): later.timestamp()},
            },
        ), bad
    # --as-of refused too: as of now.
    before = dt.datetime.now(dt.timezone.utc).timestamp()
    assert invoke(*args, "--as-of", "yesterday").exit_code == 2
    [stamp] = parse(prom)["opsaudit_check_timestamp_seconds"].values()
    assert (parse(prom)["opsaudit_check_ok"], stamp >= before) == ({(): 0}, True)
    # The file itself refused (its directory gone): nothing is written anywhere.
    assert invoke(*args, "--as-of", iso(as_of)).exit_code == 0
    written = prom.read_text()
    missing = tmp_path / "gone" / "check.prom"
    result = invoke(*args[:-1], str(missing), "--max-age", "soon")
    assert (result.exit_code, prom.read_text(), missing.parent.exists()) == (2, written, False)


def test_every_finding_kind_check_emits_is_declared_once() -> None:
    """`check` builds each `Finding` with its kind spelt out; every such kind is in
    FINDING_KINDS, the list `check --metrics-file` writes a sample for (0 included)."""
    import exporter.ops.check as check

    tree = ast.parse(Path(check.__file__).read_text())
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Finding"
    ]
    kinds = [n.args[0] for n in calls]
    assert all(isinstance(k, ast.Constant) for k in kinds)  # a literal each: none missed here
    emitted = {k.value for k in kinds if isinstance(k, ast.Constant)}
    assert sorted(emitted) == sorted(check.FINDING_KINDS)
    assert len(set(check.FINDING_KINDS)) == len(check.FINDING_KINDS)
    samples = check_metrics(
        check.CheckReport(as_of=dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc))
    )[2]
    assert samples.samples == [({"check": kind}, 0.0) for kind in check.FINDING_KINDS]


def test_label_values_are_escaped(tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    weird = 'a "quoted" \\ back\nslash'
    write_metrics(path, [Metric("opsaudit_test", "Help with \\ and more.").add(1.5, action=weird)])
    [family] = text_string_to_metric_families(path.read_text())
    assert (family.name, family.documentation) == ("opsaudit_test", "Help with \\ and more.")
    assert [(s.labels, s.value) for s in family.samples] == [({"action": weird}, 1.5)]
    assert render_metrics([]) == "\n"
    assert not [p for p in os.listdir(tmp_path) if p != "x.prom"]


def test_partial_and_locked_runs_still_write_metrics(make_sim: Any, tmp_path: Path) -> None:
    import fcntl

    sim = make_sim(seed=11, projects=3, shared_projects=0, orgs=1)
    data_dir, prom = tmp_path / "data", tmp_path / "opsaudit.prom"
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    args = ["sync", "--data-dir", str(data_dir), "--max-rps", "0", "--metrics-file", str(prom)]
    assert invoke(*args, env=env).exit_code == 0
    first = parse(prom)["opsaudit_last_success_timestamp_seconds"]
    sim.fail_requests(f"/projects/{sorted(sim.project_ids())[0]}/operations", 400)
    assert invoke(*args, env=env).exit_code == 1
    metrics = parse(prom)
    assert metrics["opsaudit_last_run_outcome"][(("outcome", "partial"),)] == 1
    assert metrics["opsaudit_last_run_projects"] == {
        (("result", "ok"),): 2,
        (("result", "failed"),): 1,
    }
    assert metrics["opsaudit_last_success_timestamp_seconds"] == first  # the ok run's
    # Another sync holds the lock: exit 4, and the file is rewritten with what is known.
    prom.unlink()
    fd = os.open(data_dir / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        locked = invoke(*args, env=env)
    finally:
        os.close(fd)
    assert locked.exit_code == 4
    assert parse(prom)["opsaudit_last_success_timestamp_seconds"] == first


def test_a_metrics_file_in_no_directory_is_refused_before_the_run(
    make_sim: Any, tmp_path: Path
) -> None:
    """Exit 2 before any request, not after the run did its work (it had committed, then
    exited 2: a supervisor saw a usage error for a run that synced)."""
    sim = make_sim(seed=12, projects=1, shared_projects=0, orgs=1)
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    prom = tmp_path / "nowhere" / "opsaudit.prom"
    for command in ("sync", "check"):
        result = invoke(
            command, "--data-dir", str(tmp_path / "data"), "--metrics-file", str(prom), env=env
        )
        assert result.exit_code == 2, result.output
        assert (
            f"Invalid value for '--metrics-file': {prom.parent} is not a directory" in result.output
        )
    assert sim.stats()["requests"] == 0
    assert not (tmp_path / "data").exists()


def test_a_killed_run_is_the_last_run_in_the_metrics(make_sim: Any, tmp_path: Path) -> None:
    """A sync killed with kill -9 never showed in the metrics: they kept the run before it
    (`outcome="ok"` 1) while `status` said `killed`, so with every cron run killed (the OOM
    killer, a timeout) the README's OpsauditSyncFailing rule never fired."""
    import json
    import signal
    import subprocess
    import sys
    import time

    sim = make_sim(seed=12, projects=3, shared_projects=0, orgs=1)
    data_dir, prom = tmp_path / "data", tmp_path / "opsaudit.prom"
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    args = ["sync", "--data-dir", str(data_dir), "--max-rps", "0", "--metrics-file", str(prom)]
    assert invoke(*args, env=env).exit_code == 0
    [(first,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    slow = subprocess.Popen(
        [sys.executable, "-m", "exporter", "sync", "--data-dir", str(data_dir), "--max-rps", "1"],
        env={**os.environ, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not state_rows(data_dir, "SELECT 1 FROM runs WHERE outcome = 'running'"):
            assert time.monotonic() < deadline and slow.poll() is None
            time.sleep(0.05)
    finally:
        slow.send_signal(signal.SIGKILL)
        slow.wait()
    status = invoke("status", "--data-dir", str(data_dir), "--format", "json")
    assert [r["outcome"] for r in json.loads(status.stdout)["runs"]][:2] == [
        "killed",
        "ok",
    ]
    # The killed run is the last run `check` judges too (it said ok while the trail was fresh).
    checked = invoke("check", "--data-dir", str(data_dir), "--metrics-file", str(prom))
    assert (checked.exit_code, checked.stdout.split(", started")[0]) == (
        8,
        "last_run_failed: the last sync",
    )
    assert "ended killed (its process died before it finished" in checked.stdout
    metrics = parse(prom)
    assert metrics["opsaudit_check_findings"][(("check", "last_run_failed"),)] == 1
    assert metrics["opsaudit_last_run_outcome"][(("outcome", "killed"),)] == 1
    assert sum(metrics["opsaudit_last_run_outcome"].values()) == 1
    # It never finished: no finish time, duration or counts are made up for it (its counts
    # were its last commit's, "0 requests" before any).
    for family in (
        "opsaudit_last_run_timestamp_seconds",
        "opsaudit_last_run_duration_seconds",
        "opsaudit_last_run_requests",
        "opsaudit_last_run_responses_429",
        "opsaudit_last_run_retries",
        "opsaudit_last_run_operations",
        "opsaudit_last_run_projects",
    ):
        assert family not in metrics
    # The trail was last current when the ok run finished, as before.
    assert metrics["opsaudit_last_success_timestamp_seconds"] == {(): first / 1e6}
    # The next run settles it, and is the last run then.
    assert invoke(*args, env=env).exit_code == 0
    assert parse(prom)["opsaudit_last_run_outcome"][(("outcome", "ok"),)] == 1


def test_a_check_whose_group_config_fails_writes_not_ok(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The group's configuration file (`opsaudit --config FILE check`, OPSAUDIT_CONFIG, a
    broken ./opsaudit.toml) failed before check's options were read: exit 2, and the previous
    verdict (`opsaudit_check_ok 1`) stood in --metrics-file, so a cron alerting on it saw ok.
    An unknown option before `check` (a typo) did the same. The file now says 0 as of --as-of;
    F and --as-of are read from check's own arguments."""
    data_dir, prom, as_of = _synced_once(make_sim, tmp_path)
    args = ["check", "--data-dir", str(data_dir), "--metrics-file", str(prom)]
    (tmp_path / "bad.toml").write_text("max_age =\n")
    (tmp_path / "good.toml").write_text("")  # the good run's: not ./opsaudit.toml
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "opsaudit.toml").write_text("no_such_setting = 1\n")
    cases: list[tuple[list[str], dict[str, str] | None]] = [
        (["--config", str(tmp_path / "missing.toml")], None),
        (["--config", str(tmp_path / "bad.toml")], None),
        (["--config", str(tmp_path)], None),  # a directory: refused by the group's callback
        (["--no-such-group-option"], None),  # (a typo in the crontab)
        ([], {"OPSAUDIT_CONFIG": str(tmp_path / "bad.toml")}),
        ([], None),  # ./opsaudit.toml, from the directory below
    ]
    for n, (before, env) in enumerate(cases):
        monkeypatch.chdir(tmp_path / ("cwd" if n == len(cases) - 1 else "."))
        assert (
            invoke(*args, "--as-of", iso(as_of), "--config", str(tmp_path / "good.toml")).exit_code
            == 0
        )
        assert parse(prom)["opsaudit_check_ok"] == {(): 1}
        later = as_of + dt.timedelta(minutes=n + 1)
        result = invoke(*before, *args, "--as-of", iso(later), env=env)
        assert (result.exit_code, parse(prom)) == (
            2,
            {
                "opsaudit_check_ok": {(): 0},
                "opsaudit_check_timestamp_seconds": {(): later.timestamp()},
            },
        ), (before, env, result.output)
    # Another command's arguments are not read for a check's file.
    written = prom.read_text()
    result = invoke("--config", str(tmp_path / "bad.toml"), "status", "--data-dir", str(prom))
    assert (result.exit_code, prom.read_text()) == (2, written)


def test_a_check_stopped_by_sigterm_writes_not_ok(make_sim: Any, tmp_path: Path) -> None:
    """SIGTERM (`timeout 60 opsaudit check ...` in cron, `systemctl stop`) ended check at once
    by Python's default action: the previous verdict (`opsaudit_check_ok 1`) stood in
    --metrics-file. Ctrl-C already wrote 0; SIGTERM now does too, and check exits 143. The
    signal is sent from inside check's body (its run_check, in a child process)."""
    import subprocess
    import sys

    data_dir, prom, as_of = _synced_once(make_sim, tmp_path)
    args = ["check", "--data-dir", str(data_dir), "--metrics-file", str(prom), "--as-of"]
    assert invoke(*args, iso(as_of)).exit_code == 0
    assert parse(prom)["opsaudit_check_ok"] == {(): 1}
    later = as_of + dt.timedelta(minutes=1)
    code = (
        "import os, signal, sys\n"
        "import exporter.ops.check as check\n"
        "judged = check.run_check\n"
        "def run_check(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return judged(*args, **kwargs)\n"
        "check.run_check = run_check\n"
        "from exporter.cli import main\n"
        f"sys.argv = ['opsaudit', *{[*args, iso(later)]!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (143, "", "Terminated.\n")
    assert parse(prom) == {
        "opsaudit_check_ok": {(): 0},
        "opsaudit_check_timestamp_seconds": {(): later.timestamp()},
    }
