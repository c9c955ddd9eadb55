#!/usr/bin/env python3
"""Exactness soak: after every `opsaudit sync` that exits 0, `operations` equals the API.

What an outside reviewer runs: randomized soaks of everything at once (many seeds, kill -9 at
random instants, deletions, retries, faults, 429s, thousands of open operations). Per seed:

- the built-in simulator runs in this process: 30 projects of one to four pages (6 with
  --quick), some shared, a history with thousands of open operations (`failed` and `error` ones
  that stay open, young ones that progress), live arrivals that go scheduling -> running ->
  failed -> running -> finished; rate limits on under a time scale (Retry-After stays short);
- each round changes the world while no sync runs: the clock advances (arrivals, progress);
  same-second bursts across the 1000-operation page boundary, continued in the same second
  after a sync read part of them; operations this script drives (failed -> retried ->
  finished, error, cancelling, unknown statuses, in-place changes with the same updated_at, a
  field nobody listed), buried under more than a page of newer operations so that only the
  refresh re-reads them; a finished operation filled in before its second read; projects added
  and deleted, shared ones too;
- random faults (5xx, dropped connections, slow and truncated bodies, 429s, a transient 404 on
  a tracked operation), then `python -m exporter sync --data-dir D` as a real subprocess:
  plainly; or killed with SIGKILL (a third anywhere in the run, a third once it talks to the
  API, a third at the first sign in the state of a walk in progress or a commit being
  published), the platform moving on before the re-run; or during live progression (not
  checked); sometimes after a run cut short by --max-requests (exit 0 but "budget": not
  complete by design, not checked) or a sync of one organization or project (not checked);
  sometimes a listing fails all run long: that sync must not exit 0; sometimes a
  `--skip-idle` run a few minutes after the round's checked sync (checked, below), and half
  the `--project` runs with `--skip-idle`;
- after every `--skip-idle` sync that exits 0: every project in scope whose listed activity
  mark is not in a second before its last walk's start was walked by that run (a `--project`
  run lists nothing, so its project is always walked: issue 19, findings 1 and 2), and
  `operations` equals the API for every project it walked (an idle one may lack operations
  that leave no trace in the listing, such as check_availability: README);
- after every sync that exits 0 while the world was frozen during it, the dataset is checked
  through `python -m exporter query --format json`:
  * `operations` of the live projects equals `Simulator.ground_truth()`: same ids, same content
    (`raw` parsed as JSON), no id twice; nothing of projects the simulator never had;
  * `operation_versions`: no (id, version) twice, versions 1..n without a gap, no two
    consecutive identical versions of one operation;
  * deleted projects keep what was stored before their deletion and are marked deleted; live
    ones are not; nothing is left in `_staging/`.

Both refresh policies run (`--policy both`, the default: each seed under each): `strict`
(`--refresh-open-every 0`: every open operation in every run, so `operations` equals the API
after every exit-0 sync) and `default` (the 24 h schedule: every operation is current or within
its bound: tracked, not hot, its retry_at not passed since its last read, last read less than a
quarter of its quiet time and less than 24 h ago). The syncs run on the simulator's clock
(`--clock-offset`, hidden), so what is fresh, hot or due is judged on the world's time.

Documented exceptions are not failures: an operation that answered the injected 404 may stay
stale for that run. The refresh is not bounded by default (README, "Rate limits"), so any other
stale operation after an exit-0 sync fails the soak; the report still says whether it was
tracked and whether it was among the 5,000 least recently checked (what a bounded run would
have been allowed to GET).

    python scripts/soak.py --seeds 20 --rounds 15            # 2-3 minutes per seed
    python scripts/soak.py --seeds 3 --rounds 8 --quick      # under a minute per seed
    python scripts/soak.py --seed-start 7 --seeds 1 -v       # replay seed 7, one line per round

The world's story is deterministic per seed (random.Random(seed)); the kill instants, which
faults hit which request and what a sync reads during live progression are not;
the simulated clock starts at the wall clock: pass the printed `--sim-start` to replay exactly.
Exit 0 when every check passed, 1 on a mismatch (seed, round, the last rounds' events and a
diff sample are printed; the data directory is kept). tests/test_soak.py runs the CI variant
(`run_seed(..., ci=True)`: CI_PLAN makes every mechanism happen in six rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exporter.simulator import Faults, RateLimits, SimConfig, Simulator  # noqa: E402

TERMINAL = frozenset({"finished", "cancelled", "skipped"})
# What a bounded run (WalkLimits, max_gets_per_run) may GET: named in the report of a stale op.
MAX_GETS_ACCOUNT = 5_000
GET_ONE = "GET /projects/{project_id}/operations/{operation_id}"  # the simulator's route name
US = 1_000_000  # microseconds per second
WORLD_CAP = 180_000  # operations: above this no bursts and no large clock moves
# What an operation this script drives may become next (platform-api.md 3.1).
NEXT_STATUS = {
    "scheduling": ["running", "running", "finished", "skipped"],
    "running": ["failed", "failed", "finished", "finished", "cancelling", "error", "in_place"],
    "failed": ["running"],
    "error": ["running"],
    "cancelling": ["cancelled"],
}
OPEN_STATUSES = ["running", "running", "scheduling", "failed", "error", "cancelling", "paused"]
# The CI variant (tests/test_soak.py): per round, what surely happens (besides random events).
# 0: a run cut short by --max-requests, new operations above its walks' top, a re-run killed
# once it talks to the API, 40 driven operations; 1: they are buried under more than a page of
# newer operations; a same-second burst of more than a page, one created_at with a fraction far
# down it; 2: more than a page of late arrivals in that same second, every driven operation
# moves (running -> failed, ...); 3: they move again (failed -> running: `failed` is not
# terminal), a shared project is deleted; 4: they move again, finished ones are filled in
# before their second read, the shared listing fails all run long; 5: a sync during live
# progression, then a checked one.
CI_PLAN: dict[int, set[str]] = {
    0: {"budget", "kill", "between", "driven", "faults"},
    1: {"bury", "burst", "fractional", "cold"},
    2: {"continue", "move_all", "faults", "skip_idle"},
    3: {"move_all", "delete_shared"},
    4: {"move_all", "fill_in", "outage", "faults"},
    5: {"move_all", "live"},
}
ERRORS = ["compute unavailable: pod not ready after 60s", "safekeeper quorum not reached"]


def _listed_activity_us(project: dict[str, Any]) -> int | None:
    """The soak's own reading of PRODUCT.md's activity mark (not the exporter's): the newest of
    a project listing's `updated_at` and `compute_last_active_at`, in microseconds."""
    marks = []
    for key in ("updated_at", "compute_last_active_at"):
        value = project.get(key)
        if isinstance(value, str):
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            marks.append(int(when.timestamp()) * US + when.microsecond)
    return max(marks) if marks else None


@dataclass
class Attempt:
    """One `opsaudit sync` subprocess."""

    rc: int | None  # None: killed
    seconds: float
    killed_at: float | None = None  # seconds after the start
    stderr: str = ""


@dataclass
class SeedResult:
    seed: int
    sim_start: str
    rounds: int = 0
    syncs: int = 0
    checked: int = 0
    kills: int = 0
    live_syncs: int = 0
    budget_syncs: int = 0  # --max-requests runs (exit 0, outcome budget: not checked)
    scoped_syncs: int = 0  # --org-id / --project runs (not checked for exactness)
    skip_idle_syncs: int = 0  # --skip-idle runs (full and --project)
    skip_idle_checked: int = 0  # ... that exited 0 and passed the idle check
    idle_left: int = 0  # projects those runs left idle (not walked)
    faulted_checked: int = 0  # checked syncs that ran with faults or 429s on
    outages: int = 0
    exit_codes: Counter[str] = field(default_factory=Counter)
    max_open: int = 0
    max_tracked: int = 0
    ops_total: int = 0
    requests: int = 0
    responses_429: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    bounded: int = 0  # checks where stale operations were within the documented bounds
    policy: str = "strict"  # --refresh-open-every 0 (strict) or the default 24 h schedule
    within_bound: int = 0  # stale operations the default schedule had not made due yet
    anomalies: list[str] = field(default_factory=list)
    failure: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        codes = " ".join(f"{k}:{v}" for k, v in sorted(self.exit_codes.items()))
        faults = " ".join(f"{k}={v}" for k, v in sorted(self.faults.items()) if v)
        return (
            f"seed {self.seed}: {'ok' if self.ok else 'FAILED'} in {self.seconds:.0f}s; "
            f"{self.rounds} rounds, {self.syncs} syncs ({self.checked} checked, "
            f"{self.faulted_checked} of them under faults), {self.kills} kills, "
            f"{self.live_syncs} during live progression, {self.budget_syncs} budgeted, "
            f"{self.outages} outages, {self.scoped_syncs} scoped; "
            f"{self.skip_idle_syncs} --skip-idle ({self.skip_idle_checked} checked, "
            f"{self.idle_left} projects left idle); "
            f"exit codes {codes}; max open ops {self.max_open} (tracked {self.max_tracked}); "
            f"ops total {self.ops_total}; {self.requests} requests, {self.responses_429} 429s, "
            f"faults {faults or 'none'}"
            + (f"; {self.bounded} bounded" if self.bounded else "")
            + f"; policy {self.policy}"
            + (
                f" ({self.within_bound} stale within their bound)"
                if self.policy != "strict"
                else ""
            )
            + (f"; {len(self.anomalies)} anomalies" if self.anomalies else "")
        )


class Mismatch(Exception):
    """A check failed: the message holds the diff sample."""


def _now_start() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean_env() -> dict[str, str]:
    proxies = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPSAUDIT_") and k != "NEON_API_KEY" and k.upper() not in proxies
    }


class Soak:
    """One seed: a simulator, a data directory and the rounds."""

    def __init__(
        self,
        seed: int,
        rounds: int,
        workdir: Path,
        *,
        projects: int | None = None,
        quick: bool = False,
        sim_start: str | None = None,
        ci: bool = False,
        slow_outages: bool = True,
        verbose: bool = False,
        policy: str = "strict",
    ) -> None:
        self.seed = seed
        self.policy = policy
        self.rounds = rounds
        self.rng = random.Random(seed)
        self.kill_rng = random.Random()  # kill instants: not part of the seed's determinism
        # Choices that depend on what the exporter did (which tracked op gets a 404): their
        # own RNG, so that the world's story stays the seed's whatever the kills hit.
        self.aux_rng = random.Random(f"{seed}/aux")
        self.quick = quick
        # The CI variant: every mechanism in a few rounds (CI_PLAN), one kill surely mid-run.
        self.plan = CI_PLAN if ci else None
        self.force_kill = ci
        self.slow_outages = slow_outages
        self.verbose = verbose
        self.data_dir = workdir / "data"
        self.workdir = workdir
        self.result = SeedResult(seed, sim_start or _now_start(), policy=policy)
        self.sim = Simulator(self._config(projects, self.result.sim_start))
        self.env: dict[str, str] = {}
        self.typical = 1.5  # seconds of a sync, for kill instants (moving average)
        self.kill_how = ""
        self.attempts = 0  # sync attempts so far (killed ones too)
        self.driven: dict[str, str] = {}  # op id -> status, for ops this script moves
        self.quiet: list[str] = []  # projects without live arrivals (--skip-idle)
        self.finished_at: dict[str, int] = {}  # driven op -> attempts when it turned terminal
        self.filled: set[str] = set()
        self.burst: tuple[str, int] | None = None  # (project, clock) of the last burst
        self.driven_project: str | None = None  # where the last driven operations went
        self.deleted: dict[str, set[str]] = {}  # deleted project -> op ids stored before
        self.stored_by_project: dict[str, set[str]] = {}
        self.events: list[str] = []  # this round's
        self.history: list[str] = []  # every round's events, for a failure report
        self.faults_on = False

    # -- set-up ---------------------------------------------------------------------------

    def _config(self, projects: int | None, start: str) -> SimConfig:
        r = self.rng
        n = projects or (6 if self.quick else 30)
        shared = r.randint(1, 2) if self.quick else r.randint(2, 4)
        # Projects of one to four pages: open operations sit below the first page.
        days = r.uniform(1.5, 3.0) if self.quick else r.uniform(1.5, 4.0)
        per_day = r.randint(500, 1000) if self.quick else r.randint(300, 900)
        # At most ~100k operations of history: the rounds add to it.
        per_day = min(per_day, int(100_000 / ((n + shared) * days)))
        return SimConfig(
            seed=self.seed,
            projects=n,
            shared_projects=shared,
            orgs=r.randint(1, 3),
            days=days,
            ops_per_project_per_day=per_day,
            live_ops_per_project_per_hour=r.uniform(100, 600),
            inclusive_cursor=r.random() < 0.3 or self.plan is not None,
            past_end=r.choice(["empty_with_pagination", "empty_without_pagination"]),
            projects_max_limit=r.choice([400, 400, 100]),
            start=start,
        )

    def run(self) -> SeedResult:
        started = time.monotonic()
        res = self.result
        self.sim.start()
        env = _clean_env()
        # The exporter under test is the one beside this script (a copy of the repository,
        # a mutant), whatever the virtualenv has installed.
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        self.env = {
            **env,
            "NEON_API_KEY": self.sim.personal_key,
            "OPSAUDIT_BASE_URL": self.sim.base_url,
        }
        if self.policy == "strict":
            # Every open operation in every run: after every exit-0 sync `operations` equals
            # the API. The default policy: every operation current or within its bound.
            self.env["OPSAUDIT_REFRESH_OPEN_EVERY"] = "0"
        try:
            for r in range(self.rounds):
                res.rounds = r + 1
                self.events = []
                self._round(r)
                self.history.append(f"round {r}: " + "; ".join(self.events))
                if self.verbose:
                    print(f"  seed {self.seed} round {r}: " + "; ".join(self.events), flush=True)
        except Mismatch as exc:
            self.history.append(f"round {res.rounds - 1}: " + "; ".join(self.events))
            res.failure = (
                f"seed {self.seed} round {res.rounds - 1} (--sim-start {res.sim_start}): "
                f"{exc}\nevents:\n  " + "\n  ".join(self.history[-6:])
            )
        finally:
            stats = self.sim.stats()
            res.requests = stats.get("requests", 0)
            res.responses_429 = stats.get("responses_429", 0)
            res.faults.update(stats.get("faults", {}))
            res.ops_total = self.sim.operation_count()
            self.sim.stop()
            res.seconds = time.monotonic() - started
        return res

    # -- one round ------------------------------------------------------------------------

    def _round(self, r: int) -> None:
        rng = self.rng
        forced = self.plan.get(r, set()) if self.plan is not None else set()
        if r == 0:
            # Two projects with no live arrivals: once their first operations have settled, a
            # --skip-idle run may leave them idle (the others always have activity).
            for _ in range(2):
                pid = self.sim.add_project()
                self.sim.set_quiet(pid)
                self.quiet.append(pid)
        self._mutate(r, forced)
        res = self.result
        res.max_open = max(res.max_open, self._open_count())
        self._faults(r, forced)
        u = rng.random()
        if r == 0:
            mode = "kill" if u < 0.4 else "plain"
        else:
            mode = "plain" if u < 0.45 else ("kill" if u < 0.8 else "live")
        if self.plan is not None:  # the CI variant: its plan decides
            mode = "kill" if "kill" in forced else ("live" if "live" in forced else "plain")
        outage = mode == "plain" and r > 0 and rng.random() < 0.08
        outage = outage if self.plan is None else "outage" in forced
        sync_args = self._sync_args()
        if (rng.random() < 0.1 and self.plan is None) or "budget" in forced:
            # A run cut short by --max-requests (exit 0, outcome "budget": documented as not
            # complete, so not checked) commits its walks' progress; the platform moves on;
            # the next run resumes them and must also read what arrived above their top.
            # Discovery takes one request per organization, the shared listing, the list of
            # organizations (and one refused page where the listing limit is 100): a few more
            # read first pages; a budget must leave two after it (a project's names listings).
            budget = len(self.sim.org_ids) + 4 + rng.randint(1, 8)
            self._attempt([*sync_args, "--max-requests", str(budget)])
            self.result.budget_syncs += 1
            self._between_runs()
            sync_args = self._sync_args()
        if r > 0 and rng.random() < 0.2 and self.plan is None:
            # A sync of part of the account first (--org-id / --project): not checked, but
            # the full sync after it must still be exact.
            only: set[str] | None = None
            if rng.random() < 0.5:
                org = rng.choice(self.sim.org_ids)
                scope = ["--org-id", org]
                # What it lists: that organization's projects (not the others', not the
                # shared ones): the idle check covers those alone.
                only = set(self.sim.project_ids(org))
            else:
                only = {rng.choice(self._live())}
                scope = ["--project", *only]
            skip_idle = rng.random() < 0.5
            if skip_idle:
                # --project with --skip-idle lists nothing: an earlier listing's activity
                # mark must not leave the project idle (issue 19, finding 1).
                scope.append("--skip-idle")
            clock = self.sim.world.clock_us
            att = self._attempt([*sync_args, *scope], kill=rng.random() < 0.3)
            self.result.scoped_syncs += 1
            if skip_idle and att.rc == 0:
                self._check_idle(clock, only)
            sync_args = self._sync_args()
        if outage:
            self._outage(sync_args)
        elif mode == "kill":
            for _ in range(rng.randint(1, 3)):
                self._checked_attempt(sync_args, kill=True)
                sync_args = self._sync_args()
                if rng.random() < 0.5 or "between" in forced:
                    # The platform moves on before the re-run (a resumed walk must also read
                    # what arrived meanwhile, above its top).
                    self._between_runs()
        elif mode == "live":
            self._live_attempt(sync_args)
            sync_args = self._sync_args()
        self._checked_attempt(sync_args)
        if (rng.random() < 0.4 and self.plan is None) or "skip_idle" in forced:
            # A --skip-idle run a few minutes later: projects with arrivals meanwhile or open
            # operations are walked, the others may be left idle. After exit 0 every project
            # whose listed activity is newer than its last walk's start was walked, and the
            # walked ones equal the API.
            seconds = rng.uniform(300, 1200)
            self.sim.advance(seconds)
            self.events.append(f"advance {seconds:.0f}s")
            self._checked_attempt([*self._sync_args(), "--skip-idle"], skip_idle=True)

    def _between_runs(self) -> None:
        rng, sim = self.rng, self.sim
        seconds = rng.uniform(0.5, 30)
        sim.advance(seconds)
        live = self._live()
        for pid in live:  # above the top of any walk the kill interrupted
            sim.add_operations(pid, rng.randint(1, 3), same_second=rng.random() < 0.5)
        pid = rng.choice(live)
        n = rng.choice([1, 20, 1001])
        sim.add_operations(pid, n, same_second=rng.random() < 0.5)
        self.events.append(f"advance {seconds:.1f}s, new ops in every project, {n} in {pid}")

    def _open_count(self) -> int:
        w = self.sim.world
        with w.lock:
            return w.open_count()

    def _live(self) -> list[str]:
        return sorted(self.sim.project_ids())

    # -- mutations ------------------------------------------------------------------------

    def _op(self, op_id: str) -> dict[str, Any]:
        w = self.sim.world
        with w.lock:
            p, i = w.find_op(op_id)
            return w.op_dict(p, i)

    def _mutate(self, r: int, forced: set[str]) -> None:
        rng, sim, ev = self.rng, self.sim, self.events
        small = sim.operation_count() > WORLD_CAP
        # A burst continued in the same second after a sync read part of it: the checkpoint's
        # second gets late arrivals above the ones seen, possibly more than a page of them.
        if self.burst is not None and (rng.random() < 0.5 or "continue" in forced):
            pid, clock = self.burst
            n = rng.choice([1, 5, 999, 1000, 1001, 1500, 2500, rng.randint(2, 1500)])
            if "continue" in forced:
                n = max(n, 1500)
            if pid in sim.project_ids() and sim.world.clock_us == clock:
                sim.add_operations(pid, n, same_second=True)
                ev.append(f"burst continued in the same second: {n} ops in {pid}")
        self.burst = None
        # The clock: arrivals, progress of open operations (failed -> running -> finished).
        kind = rng.choices(["none", "sub", "small", "medium", "large"], [1, 2, 3, 3, 2])[0]
        if small and kind == "large":
            kind = "medium"
        seconds = {
            "none": 0.0,
            "sub": rng.uniform(0.05, 0.95),
            "small": rng.uniform(1, 10),
            "medium": rng.uniform(20, 120),
            "large": rng.uniform(300, 900) if not self.quick else rng.uniform(120, 300),
        }[kind]
        if seconds:
            before = sim.operation_count()
            sim.advance(seconds)
            ev.append(f"advance {seconds:.2f}s (+{sim.operation_count() - before} ops)")
        live = self._live()
        # Operations this script drives (live progression leaves them alone).
        driven_pid: str | None = None
        if rng.random() < 0.6 or "driven" in forced:
            driven_pid = rng.choice(live)
            n = rng.randint(1, 40) if "driven" not in forced else 40
            status = rng.choice(OPEN_STATUSES) if "driven" not in forced else "running"
            same = rng.random() < 0.5
            ids = sim.add_operations(driven_pid, n, status=status, same_second=same)
            self.driven.update(dict.fromkeys(ids, status))
            self.driven_project = driven_pid
            ev.append(f"{n} {status} ops in {driven_pid}")
        # Open operations buried under more than a page of newer ones, one per second: the
        # next walk stops above them, so only the refresh (more pages or GETs) re-reads them.
        if (rng.random() < 0.15 or "bury" in forced) and not small:
            pid = self.driven_project if self.driven_project in live else rng.choice(live)
            n = rng.randint(1000, 1500)
            sim.add_operations(pid, n, same_second=False)
            ev.append(f"buried {pid}'s open ops under {n} ops, one per second")
        # Same-second bursts across page boundaries of 1000.
        if (rng.random() < 0.3 or "burst" in forced) and not small:
            pid = rng.choice(live)
            n = rng.choice([999, 1000, 1001, 2000, rng.randint(300, 2600)])
            status = rng.choice([None, None, None, "running"])
            if "burst" in forced:
                n, status = max(n, 1200), None
            if status is not None:
                n = min(n, 600)
            ids = sim.add_operations(pid, n, status=status, same_second=True)
            if status is not None:
                self.driven.update(dict.fromkeys(ids, status))
            if n >= 2 and (rng.random() < 0.15 or "fractional" in forced):
                # One created_at with a fraction and an offset among whole-second neighbours.
                k = rng.randrange(1, n)
                # The CI variant: the second oldest, far down the walk (below a page of them).
                sim.fractional_created_at(ids[1 if "fractional" in forced else k])
                ev.append("one fractional created_at")
            self.burst = (pid, sim.world.clock_us)
            ev.append(f"burst of {n} {status or 'finished'} ops in one second in {pid}")
        self._move_driven("move_all" in forced)
        self._fill_in("fill_in" in forced)
        self._touch_cold("cold" in forced)
        # Projects come and go (deleted ones keep their history).
        if rng.random() < 0.12:
            shared = rng.random() < 0.3
            org = None if shared else rng.choice(sim.org_ids)
            pid = sim.add_project(org, shared=shared)
            ev.append(f"added {'shared ' if shared else ''}project {pid}")
        random_delete = len(live) > 3 and rng.random() < 0.08 and self.plan is None
        if random_delete or "delete_shared" in forced:
            pid = rng.choice(live)
            if "delete_shared" in forced:
                shared_ids = sim.project_ids(sim.world.foreign_org)
                pid = shared_ids[0] if shared_ids else pid
            self.deleted[pid] = set(self.stored_by_project.get(pid, set()))
            sim.delete_project(pid)
            ev.append(f"deleted project {pid}")

    def _move_driven(self, every: bool = False) -> None:
        rng, sim = self.rng, self.sim
        live = set(self._live())
        movable = sorted(i for i, s in self.driven.items() if s not in TERMINAL)
        if not movable:
            return
        k = rng.randint(0, min(len(movable), 150)) if not every else len(movable)
        moved = Counter[str]()
        for op_id in rng.sample(movable, k):
            op = self._op(op_id)
            if op["project_id"] not in live:
                self.driven.pop(op_id)
                continue
            st = op["status"]
            nxt = rng.choice(NEXT_STATUS.get(st, ["running"]))
            duration = int(op.get("total_duration_ms") or 0) + rng.randint(1, 5000)
            if nxt == "in_place":
                # Progress without a new updated_at (the in-place change seen on the real API).
                fields: dict[str, Any] = {"total_duration_ms": duration}
                if rng.random() < 0.1:
                    fields["trace_id"] = f"{rng.getrandbits(64):016x}"  # a field nobody listed
                sim.update_operation(op_id, updated_at=op["updated_at"], **fields)
                moved["in-place"] += 1
                continue
            fields = {"status": nxt, "total_duration_ms": duration}
            if nxt in ("failed", "error"):
                failures = int(op.get("failures_count") or 0) + 1
                fields["failures_count"] = failures
                fields["error"] = f"attempt {failures}: {rng.choice(ERRORS)}"
                retry = sim.world.clock_us // 1_000_000 + rng.randint(2, 30)
                fields["retry_at"] = datetime.fromtimestamp(retry, timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
            sim.update_operation(op_id, **fields)
            self.driven[op_id] = nxt
            moved[f"{st}->{nxt}"] += 1
            if nxt in TERMINAL:
                self.finished_at[op_id] = self.attempts
        if moved:
            self.events.append("moved " + ", ".join(f"{n} {k}" for k, n in sorted(moved.items())))

    def _touch_cold(self, surely: bool = False) -> None:
        """Old open operations of the history (`failed`, `error`, quiet for a day or more) change in
        place: the strict policy must show it after the next sync; the default schedule may
        leave them stale within their bound (not hot: changed days ago as far as it knows)."""
        rng, sim = self.rng, self.sim
        if not surely and rng.random() < 0.7:
            return
        old = sim.world.clock_us - 86_400 * US
        cold = sorted(
            i
            for i, o in sim.ground_truth().items()
            if o["status"] in ("failed", "error")
            and i not in self.driven
            and datetime.strptime(o["updated_at"], "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=timezone.utc)
            .timestamp()
            * US
            < old
        )
        for op_id in rng.sample(cold, min(len(cold), rng.randint(1, 5))):
            op = self._op(op_id)
            failures = int(op.get("failures_count") or 0) + 1
            sim.update_operation(op_id, failures_count=failures, updated_at=op["updated_at"])
        if cold:
            self.events.append("old open operations changed in place")

    def _fill_in(self, surely: bool = False) -> None:
        """total_duration_ms filled in with the same updated_at after the operation finished,
        before its second read (README: a freshly finished operation is read once more)."""
        rng, sim = self.rng, self.sim
        live = set(self._live())
        eligible = sorted(
            i
            for i, at in self.finished_at.items()
            if self.attempts - at <= 1 and i not in self.filled
        )
        if not eligible or (rng.random() < 0.5 and not surely):
            return
        n = 0
        for op_id in rng.sample(eligible, min(len(eligible), rng.randint(1, 10))):
            op = self._op(op_id)
            duration = int(op.get("total_duration_ms") or 0) + rng.randint(1, 500)
            updated = datetime.strptime(op["updated_at"], "%Y-%m-%dT%H:%M:%SZ")
            # A finished operation stays tracked until a read 15 minutes (on the simulator's
            # clock, the sync's) after its last change; at most one sync ran since it finished.
            fresh = updated.replace(tzinfo=timezone.utc).timestamp() > time.time() - 600
            if op["project_id"] not in live or not fresh:
                continue
            sim.update_operation(op_id, total_duration_ms=duration, updated_at=op["updated_at"])
            self.filled.add(op_id)
            n += 1
        if n:
            self.events.append(f"filled in {n} finished ops")

    # -- faults ---------------------------------------------------------------------------

    def _faults(self, r: int, forced: set[str]) -> None:
        rng, sim = self.rng, self.sim
        on = rng.random() < 0.6 or "faults" in forced
        if on:
            sim.faults = Faults(
                p_5xx=rng.uniform(0, 0.06),
                p_drop=rng.uniform(0, 0.04),
                p_slow=rng.uniform(0, 0.1),
                slow_seconds=rng.uniform(0.01, 0.2),
                p_truncate=rng.uniform(0, 0.04),
                seed=rng.randrange(10**6),
            )
            f = sim.faults
            self.events.append(
                f"faults 5xx {f.p_5xx:.3f} drop {f.p_drop:.3f} slow {f.p_slow:.3f} "
                f"truncate {f.p_truncate:.3f}"
            )
        else:
            sim.faults = Faults()
        limits = rng.random() < 0.5 or "faults" in forced
        if limits:
            # The account's minute lasts 1/scale of one: Retry-After stays a fraction of a
            # second to a few seconds; below 700/min a fast sync meets 429s.
            scale = rng.choice([20.0, 60.0])
            per_minute = rng.choice([120, 300, 700])
            per_route = rng.choice([20, 40])
            sim.rate_limits = RateLimits(
                enabled=True,
                per_minute=per_minute,
                per_route_per_second=per_route,
                retry_after=rng.random() < 0.8,
                time_scale=scale,
            )
            self.events.append(f"rate limits {per_minute}/min {per_route}/s x{scale:g}")
        else:
            sim.rate_limits = RateLimits()
        self.faults_on = on or limits

    def _sync_args(self) -> list[str]:
        rng = self.rng
        rps = rng.choice([0, 25, 60, 150, 400])
        concurrency = rng.randint(1, 6)
        if self.plan is not None:  # the CI variant: fast runs
            rps, concurrency = (0 if rps < 150 else rps), max(concurrency, 3)
        args = ["--max-rps", str(rps), "--concurrency", str(concurrency)]
        if rng.random() < 0.2:
            args.append("--no-compact")
        return args

    # -- syncs ----------------------------------------------------------------------------

    def _attempt(self, args: list[str], kill: bool = False) -> Attempt:
        """One sync subprocess; with `kill`, SIGKILL at a random instant of its typical run."""
        cmd = [sys.executable, "-m", "exporter", "sync", "--data-dir", str(self.data_dir)]
        # The sync's clock is the simulator's (which the rounds move ahead of the wall clock):
        # what is fresh, hot or due is judged on the time the world lives in.
        offset = self.sim.world.clock_us / 1e6 - time.time()
        cmd += [*args, "--no-progress", "--clock-offset", f"{offset:.6f}"]
        err_path = self.workdir / "sync.stderr"
        base = self.sim.stats().get("requests", 0)
        started = time.monotonic()
        killed_at: float | None = None
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=err, cwd=self.workdir
            )
            if kill:
                killed_at = self._kill(proc, started, base)
            rc = proc.wait(timeout=600)
        seconds = time.monotonic() - started
        self.attempts += 1
        res = self.result
        res.syncs += 1
        stderr = err_path.read_text(errors="replace")
        if killed_at is not None:
            res.kills += 1
            res.exit_codes["killed"] += 1
            self.events.append(
                f"sync {' '.join(args)} killed at {killed_at:.2f}s ({self.kill_how})"
            )
            return Attempt(None, seconds, killed_at, stderr)
        res.exit_codes[str(rc)] += 1
        self.typical = 0.7 * self.typical + 0.3 * seconds if res.syncs > 1 else seconds
        self.events.append(f"sync {' '.join(args)} exit {rc} in {seconds:.2f}s")
        if rc == 1:
            last = [ln for ln in stderr.splitlines() if ln.strip()][-1:]
            self.events.append(f"({last[0][:160] if last else 'no stderr'})")
        if "Traceback" in stderr or rc not in (0, 1):
            res.anomalies.append(f"round {res.rounds - 1}: exit {rc}: {stderr.strip()[-400:]}")
        return Attempt(rc, seconds, None, stderr)

    def _kill(self, proc: subprocess.Popen[bytes], started: float, base: int) -> float | None:
        """SIGKILL `proc` at a random instant; returns when (seconds after start), or None when
        it ended first. A third of the kills land anywhere (start-up included), a third once it
        talks to the API (mid-walk, mid-commit, mid-compaction), a third at the first sign in
        the state of a walk in progress or a commit being published (then resume and recovery
        have work to do)."""
        kr = self.kill_rng
        how = kr.choice(["anywhere", "talking", "state"])
        if self.force_kill and not self.result.kills:
            how = "talking"  # the CI variant: one kill surely lands mid-run
        lo = 0.0
        if how in ("talking", "state"):
            deadline = started + 30
            while (
                proc.poll() is None
                and self.sim.stats().get("requests", 0) == base
                and time.monotonic() < deadline
            ):
                time.sleep(0.005)
            lo = time.monotonic() - started
        at = kr.uniform(lo, max(lo, self.typical) * 1.1)
        if self.force_kill and not self.result.kills:
            at = lo + 0.05
        if how == "state":  # the fallback when no sign appears
            at = max(lo, self.typical) * 1.5 + 1.0
        while proc.poll() is None and time.monotonic() - started < at:
            if how == "state" and self._in_progress():
                how = "state: walk in progress or commit pending"
                break
            time.sleep(0.005)
        if proc.poll() is not None:
            return None
        self.kill_how = how
        os.kill(proc.pid, signal.SIGKILL)
        return time.monotonic() - started

    def _in_progress(self) -> bool:
        """A walk in progress (resume cursor) or a commit not yet published, per the state."""
        path = self.data_dir / "state.sqlite"
        if not path.exists():
            return False
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05)
            try:
                row = con.execute(
                    "SELECT (SELECT count(*) FROM projects WHERE resume_cursor IS NOT NULL) + "
                    "(SELECT count(*) FROM files WHERE state = 'pending')"
                ).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return False
        return bool(row and row[0])

    def _live_attempt(self, args: list[str]) -> None:
        """A sync while the platform moves on (not checked); sometimes killed.

        Like `Simulator.start_live`, but a fixed number of ticks whatever the sync's duration
        (the ticks left when it ends run at once): the world stays the seed's."""
        rng = self.rng
        per_tick = rng.uniform(0.2, 3.0)
        ticks = rng.randint(10, 60)
        kill = rng.random() < 0.4
        done = threading.Event()

        def tick() -> None:
            for _ in range(ticks):
                done.wait(0.03)
                self.sim.advance(per_tick)

        ticker = threading.Thread(target=tick, name="soak-live", daemon=True)
        ticker.start()
        try:
            self._attempt(args, kill=kill)
        finally:
            done.set()
            ticker.join()
        self.result.live_syncs += 1
        self.events.append(f"(live progression: {ticks} x {per_tick:.1f}s during it)")

    def _outage(self, args: list[str]) -> None:
        """A listing fails for the whole sync: it must not exit 0 (README: partial)."""
        sim, rng = self.sim, self.rng
        if rng.random() < 0.5:
            target = "/projects/shared"
        else:
            target = f"/projects/{rng.choice(self._live())}/operations"
        # Mostly an answer the client does not retry (fast); sometimes 503s, retried until the
        # request gives up (a minute of backoff).
        status = rng.choice([400, 403, 500, 503]) if rng.random() < 0.3 else 403
        if not self.slow_outages and status >= 500:
            status = 403
        sim.fail_requests(target, status)
        try:
            att = self._attempt(args)
        finally:
            sim.clear_failures()
        self.result.outages += 1
        if att.rc == 0:
            raise Mismatch(f"{target} answered {status} all sync long, yet the sync exited 0")

    def _tracked(self) -> list[str]:
        """The operations the state tracks (open, or finished for one more look): read-only."""
        path = self.data_dir / "state.sqlite"
        if not path.exists():
            return []
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return sorted(i for (i,) in con.execute("SELECT id FROM open_ops"))
        except sqlite3.OperationalError:
            return []  # killed before the schema was committed
        finally:
            con.close()

    def _allowance(self) -> dict[str, str]:
        """Before a run: the tracked operations it may surely GET (id -> project), as the
        exporter hands them out (README: 5,000 per run, least recently checked first; `_state`
        `refresh_allowance`). The run drops the operations of projects deleted since from
        its own list first, so its allowance holds at least these."""
        path = self.data_dir / "state.sqlite"
        if not path.exists():
            return {}
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT id, project_id FROM open_ops ORDER BY checked_us, id LIMIT ?",
                (MAX_GETS_ACCOUNT,),
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
        finally:
            con.close()
        return dict(rows)

    def _checked_us(self, ids: list[str]) -> dict[str, int]:
        """Tracked operations among `ids` -> when the state says they were last re-read."""
        path = self.data_dir / "state.sqlite"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT id, checked_us FROM open_ops").fetchall()
        finally:
            con.close()
        wanted = set(ids)
        return {i: c for i, c in rows if i in wanted}

    def _checked_attempt(
        self, args: list[str], kill: bool = False, skip_idle: bool = False
    ) -> None:
        """A sync with the world frozen (maybe killed); checked when it exits 0. With
        `skip_idle` (`--skip-idle` in `args`): the idle check, and exactness of the projects it
        walked (an idle project may miss operations that leave no trace in the listing, such
        as check_availability: README)."""
        sim, rng = self.sim, self.aux_rng
        tracked_ids = self._tracked()
        tracked = len(tracked_ids)
        res = self.result
        res.max_tracked = max(res.max_tracked, tracked)
        injected: str | None = None
        live = set(self._live())
        candidates = [i for i in tracked_ids if i in self.driven or rng.random() < 0.05]
        if candidates and rng.random() < 0.1:
            op_id = rng.choice(candidates)
            if self._op(op_id)["project_id"] in live:
                # The next GET of this tracked operation answers 404 once (README: a single
                # 404 does not stop tracking it).
                sim.fail_requests(f"/operations/{op_id}", 404, times=1)
                injected = op_id
                self.events.append(f"one 404 on {op_id}")
        clock, count = sim.world.clock_us, sim.operation_count()
        allowed = self._allowance()
        gets_before = sim.stats().get("by_route", {}).get(GET_ONE, 0)
        run_started_us = sim.world.clock_us  # the sync runs on this clock (--clock-offset)
        att = self._attempt(args, kill=kill)
        gets = sim.stats().get("by_route", {}).get(GET_ONE, 0) - gets_before
        consumed = injected is not None and any(
            e[0] == f"/operations/{injected}" and e[2] == 0 for e in sim._scripted
        )
        sim.clear_failures()
        if sim.world.clock_us != clock or sim.operation_count() != count:
            raise RuntimeError("the world moved during a checked sync")  # a bug of this script
        if att.rc != 0:
            return
        exempt = {injected} if consumed and injected is not None else set()
        walked = None
        if skip_idle:
            res.skip_idle_syncs += 1
            walked = self._check_idle(clock, None)
        self._check(exempt, allowed, gets, run_started_us, att, only=walked)
        res.checked += 1
        res.faulted_checked += self.faults_on

    # -- the checks -----------------------------------------------------------------------

    def _query(self, sql: str) -> list[dict[str, Any]]:
        cmd = [sys.executable, "-m", "exporter", "query", "--data-dir", str(self.data_dir)]
        proc = subprocess.run(
            [*cmd, "--format", "json", sql],
            env=self.env,
            capture_output=True,
            text=True,
            cwd=self.workdir,
            timeout=600,
        )
        if proc.returncode != 0:
            raise Mismatch(f"query exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
        rows: list[dict[str, Any]] = json.loads(proc.stdout)
        return rows

    def _check(
        self,
        exempt: set[str],
        allowed: dict[str, str],
        gets: int,
        run_started_us: int,
        att: Attempt,
        only: set[str] | None = None,
    ) -> None:
        sim = self.sim
        truth = sim.ground_truth()
        if only is not None:  # a --skip-idle run: the projects it walked
            truth = {k: v for k, v in truth.items() if v["project_id"] in only}
        live = set(sim.project_ids())
        known = set(sim.world.by_id)
        rows = self._query("SELECT id, project_id, raw FROM operations")
        ids = Counter(r["id"] for r in rows)
        twice = [i for i, n in ids.items() if n > 1]
        problems: list[str] = []
        if twice:
            problems.append(f"{len(twice)} ids twice in operations, e.g. {twice[:3]}")
        stored: dict[str, dict[str, Any]] = {}
        by_project: dict[str, set[str]] = {}
        for r in rows:
            by_project.setdefault(r["project_id"], set()).add(r["id"])
            if r["project_id"] in live and (only is None or r["project_id"] in only):
                stored[r["id"]] = json.loads(r["raw"])
        foreign = sorted({r["project_id"] for r in rows} - known)
        if foreign:
            problems.append(f"operations of projects the API never had: {foreign[:3]}")
        missing = sorted(set(truth) - set(stored))
        extra = sorted(set(stored) - set(truth))
        differ = sorted(i for i in truth if i in stored and stored[i] != truth[i])
        differ = [i for i in differ if i not in exempt]
        if missing:
            sample = [truth[i] for i in missing[:2]]
            problems.append(f"{len(missing)} operations missing, e.g. {sample}")
        if extra:
            problems.append(f"{len(extra)} operations the API does not have, e.g. {extra[:3]}")
        if differ:
            checked = self._checked_us(differ)

            # The refresh is not bounded by default (README, "Rate limits"): nothing excused
            # but, under the default schedule, what it has not made due yet.
            blamed = [j for j in differ if self._due(j)]
            self.result.within_bound += len(differ) - len(blamed)
            i = (blamed or differ)[0]
            diff = {
                k: (stored[i].get(k), truth[i].get(k))
                for k in sorted(set(stored[i]) | set(truth[i]))
                if stored[i].get(k) != truth[i].get(k)
            }
            untracked = sum(1 for j in differ if j not in checked)
            reread = sum(1 for j in differ if checked.get(j, 0) >= run_started_us)
            text = (
                f"{len(differ)} operations differ from the API ({untracked} of them no longer "
                f"tracked as open, {reread} re-read by this sync, {len(differ) - len(blamed)} "
                f"left by a documented bound), e.g. {i} (driven: {i in self.driven}, tracked: "
                f"{i in checked}, allowed a GET: {i in allowed}): stored vs API {diff}"
            )
            if blamed:
                problems.append(text)
            else:  # the default schedule: every one of them within its bound
                self.events.append(f"{len(differ)} stale within their bound (not due yet)")
        for pid, before in self.deleted.items():
            lost = before - by_project.get(pid, set())
            if lost:
                problems.append(
                    f"deleted project {pid} lost {len(lost)} operations, e.g. {sorted(lost)[:2]}"
                )
        problems += self._check_versions()
        problems += self._check_projects(live)
        staging = self.data_dir / "_staging"
        if staging.exists() and any(staging.iterdir()):
            problems.append(f"files left in _staging: {sorted(os.listdir(staging))[:3]}")
        if problems:
            tail = att.stderr.strip()[-600:]
            raise Mismatch(
                "after a sync that exited 0:\n  - "
                + "\n  - ".join(problems)
                + (f"\nsync stderr (tail):\n{tail}" if tail else "")
            )
        self.stored_by_project = {p: ids_ for p, ids_ in by_project.items() if p in live}
        self.events.append(f"checked {len(truth)} ops: exact")

    def _check_idle(self, clock_us: int, only: set[str] | None) -> set[str]:
        """After an exit-0 `--skip-idle` run that started at the (frozen) clock `clock_us`:
        every live project in scope (`only`, else all) whose listed activity mark is not in a
        second before its last walk's start was walked by this run. Marks are whole seconds:
        activity in the walk's own second may be after it (issue 19, finding 2). Returns the
        projects this run walked."""
        path = self.data_dir / "state.sqlite"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            walked_from = dict(con.execute("SELECT id, walked_from_us FROM projects").fetchall())
        finally:
            con.close()
        w = self.sim.world
        scope = set(self._live()) if only is None else only
        walked = {p for p in scope if (walked_from.get(p) or 0) >= clock_us}
        problems = []
        with w.lock:
            for pid in sorted(scope - walked):
                p = w.live_project(pid)
                if p is None:
                    continue
                mark = _listed_activity_us(json.loads(p.rendered_meta))
                last = walked_from.get(pid)
                if last is None or (mark is not None and mark // US >= last // US):
                    problems.append(
                        f"{pid}: not walked, listed activity {mark} not before the second of "
                        f"its last walk's start {last}"
                    )
        if problems:
            raise Mismatch(
                "after a --skip-idle sync that exited 0, projects with activity since their "
                "last walk were left idle:\n  - " + "\n  - ".join(problems[:5])
            )
        self.result.skip_idle_checked += 1
        self.result.idle_left += len(scope - walked)
        self.events.append(f"--skip-idle: {len(walked)} walked, {len(scope - walked)} idle")
        return walked

    def _due(self, op_id: str) -> bool:
        """PRODUCT.md's schedule at the (frozen) clock: must this sync have re-read `op_id`?
        Hot (created or changed within the hour, retry_at passed since its last read, finished
        and settling, a pending 404) or its last read older than a quarter of its quiet time
        or than the 24 h bound. Untracked: always (it should have been tracked)."""
        if self.policy == "strict":
            return True
        path = self.data_dir / "state.sqlite"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = con.execute(
                "SELECT created_us, status, checked_us, changed_us, retry_us, misses "
                "FROM open_ops WHERE id = ?",
                (op_id,),
            ).fetchone()
        finally:
            con.close()
        if row is None:
            return True
        created, status, checked, changed, retry, misses = row
        now = self.sim.world.clock_us
        if status in ("finished", "cancelled", "skipped") or changed is None or misses:
            return True
        if now - max(created, changed) < 3600 * US or (
            retry is not None and checked < retry <= now
        ):
            return True
        return now >= checked + min((checked - changed) / 4, 86_400 * US)

    def _check_versions(self) -> list[str]:
        rows = self._query(
            "SELECT 'twice' AS kind, id, version, NULL AS raw FROM operation_versions "
            "GROUP BY id, version HAVING count(*) > 1 "
            "UNION ALL SELECT 'gap', id, max(version), NULL FROM operation_versions "
            "GROUP BY id HAVING max(version) <> count(*) OR min(version) <> 1 "
            "UNION ALL SELECT 'multi', id, version, raw FROM operation_versions "
            "WHERE id IN (SELECT id FROM operation_versions WHERE version > 1)"
        )
        problems: list[str] = []
        twice = [(r["id"], r["version"]) for r in rows if r["kind"] == "twice"]
        if twice:
            problems.append(f"{len(twice)} (id, version) twice, e.g. {twice[:3]}")
        gaps = [(r["id"], r["version"]) for r in rows if r["kind"] == "gap"]
        if gaps:
            problems.append(f"{len(gaps)} operations with a gap in their versions: {gaps[:3]}")
        multi: dict[str, dict[int, Any]] = {}
        for r in rows:
            if r["kind"] == "multi":
                multi.setdefault(r["id"], {})[r["version"]] = json.loads(r["raw"])
        same = [(i, v) for i, vs in multi.items() for v in vs if v + 1 in vs and vs[v] == vs[v + 1]]
        if same:
            i, v = same[0]
            problems.append(
                f"{len(same)} consecutive identical versions, e.g. {i} v{v}/v{v + 1}: {multi[i][v]}"
            )
        return problems

    def _check_projects(self, live: set[str]) -> list[str]:
        rows = self._query("SELECT id, deleted_at IS NOT NULL AS deleted FROM projects")
        marked = {r["id"]: r["deleted"] for r in rows}
        problems = []
        unmarked = sorted(p for p in self.deleted if p in marked and not marked[p])
        if unmarked:
            problems.append(f"deleted projects not marked deleted: {unmarked[:3]}")
        wrong = sorted(p for p in live if marked.get(p))
        if wrong:
            problems.append(f"live projects marked deleted: {wrong[:3]}")
        absent = sorted(live - set(marked))
        if absent:
            problems.append(f"live projects missing from `projects`: {absent[:3]}")
        return problems


def run_seed(
    seed: int,
    rounds: int,
    *,
    projects: int | None = None,
    quick: bool = False,
    sim_start: str | None = None,
    keep: bool = False,
    ci: bool = False,
    slow_outages: bool = True,
    verbose: bool = False,
    workdir: Path | None = None,
    policy: str = "strict",
) -> SeedResult:
    """Soak one seed in a temporary directory (kept on a failure, or with `keep`)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"opsaudit-soak-{seed}-", dir=workdir))
    soak = Soak(
        seed,
        rounds,
        tmp,
        projects=projects,
        quick=quick,
        sim_start=sim_start,
        ci=ci,
        slow_outages=slow_outages,
        verbose=verbose,
        policy=policy,
    )
    result = soak.run()
    if result.ok and not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    elif not result.ok:
        result.failure = f"{result.failure}\ndata directory kept: {soak.data_dir}"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds")
    parser.add_argument("--seed-start", type=int, default=0, help="the first seed")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per seed")
    parser.add_argument("--projects", type=int, default=None, help="org projects (default 30)")
    parser.add_argument("--quick", action="store_true", help="small worlds (6 projects)")
    parser.add_argument("--sim-start", default=None, help="the simulated clock at start")
    parser.add_argument("--keep", action="store_true", help="keep every data directory")
    parser.add_argument("--stop-on-failure", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="append results as JSON lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per round")
    parser.add_argument(
        "--policy",
        choices=["strict", "default", "both"],
        default="both",
        help="strict: --refresh-open-every 0, operations == the API after every exit-0 sync; "
        "default: the 24 h schedule, every operation current or within its bound; both: "
        "each seed under each",
    )
    args = parser.parse_args(argv)
    totals = Counter[str]()
    failures: list[str] = []
    started = time.monotonic()
    policies = ["strict", "default"] if args.policy == "both" else [args.policy]
    for seed, policy in (
        (s, p) for s in range(args.seed_start, args.seed_start + args.seeds) for p in policies
    ):
        res = run_seed(
            seed,
            args.rounds,
            projects=args.projects,
            quick=args.quick,
            sim_start=args.sim_start,
            keep=args.keep,
            verbose=args.verbose,
            policy=policy,
        )
        print(res.summary(), flush=True)
        for a in res.anomalies[:3]:
            print(f"  anomaly: {a}", flush=True)
        totals.update(
            seeds=1, syncs=res.syncs, checked=res.checked, kills=res.kills, rounds=res.rounds
        )
        if args.json is not None:
            record = {k: (dict(v) if isinstance(v, Counter) else v) for k, v in vars(res).items()}
            with open(args.json, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        if not res.ok:
            print(f"MISMATCH {res.failure}", flush=True)
            failures.append(f"seed {seed}")
            if args.stop_on_failure:
                break
    print(
        f"{totals['seeds']} seeds, {totals['rounds']} rounds, {totals['syncs']} syncs "
        f"({totals['checked']} checked exact), {totals['kills']} kills in "
        f"{time.monotonic() - started:.0f}s; "
        + (f"FAILED: {', '.join(failures)}" if failures else "no mismatch"),
        flush=True,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
