"""Deterministic data: names, ids and the operation mix of a real account, from a seed."""

from __future__ import annotations

import random
from bisect import bisect
from dataclasses import dataclass

from exporter.simulator._model import Interner, ProjectData
from exporter.simulator._names import new_branch, new_endpoint
from exporter.simulator._timefmt import US

# Endpoint-level actions carry endpoint_id; branch-level ones do not (platform-api.md 2.3).
ENDPOINT_RARE = [
    "create_compute",
    "stop_compute",
    "start_reserved_compute",
    "sync_dbs_and_roles_from_compute",
    "prewarm_replica",
    "promote_replica",
]
BRANCH_RARE = [
    "apply_storage_config",
    "create_timeline",
    "delete_tenant",
    "tenant_attach",
    "tenant_detach",
    "tenant_reattach",
    "timeline_archive",
    "timeline_unarchive",
    "delete_timeline",
    "tenant_ignore",
    "tenant_migrate",
    "replace_safekeeper",
    "disable_maintenance",
    "prepare_secondary_pageserver",
    "switch_pageserver",
    "detach_parent_branch",
    "import_data",
    "apply_schema_from_branch",
]
# Values nobody has listed yet: enums grow (PRODUCT.md), the exporter must keep them.
UNKNOWN_ACTIONS = ["rotate_credentials_v2", "reshard_tenant", "lfc_autoresize"]
UNKNOWN_STATUSES = ["paused", "waiting_for_quorum"]
COMMON = ["check_availability", "start_compute", "suspend_compute", "apply_config", "create_branch"]
STATUSES = ["scheduling", "running", "finished", "failed", "cancelling", "cancelled", "skipped"]
ERRORS = [
    "compute unavailable: pod not ready after 60s",
    "pageserver request timed out after 30s",
    "failed to apply config: connection reset by peer",
    "safekeeper quorum not reached",
    "could not start compute: no capacity in region",
]
# Typical durations (ms) per action; everything else takes ~2 s.
MEAN_MS = {
    "check_availability": 1500,
    "start_compute": 900,
    "suspend_compute": 300,
    "apply_config": 400,
    "create_branch": 150,
}

ADJ = [
    "bold",
    "calm",
    "dry",
    "late",
    "wild",
    "quiet",
    "red",
    "misty",
    "proud",
    "young",
    "silent",
    "round",
    "old",
    "dark",
    "snowy",
]
NOUN = [
    "hall",
    "cell",
    "dawn",
    "surf",
    "tree",
    "river",
    "moon",
    "fire",
    "wave",
    "sky",
    "leaf",
    "stone",
    "frog",
    "cloud",
    "bird",
]
ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def new_interners() -> tuple[Interner, Interner]:
    actions = Interner(COMMON + ENDPOINT_RARE + BRANCH_RARE + UNKNOWN_ACTIONS)
    statuses = Interner([*STATUSES, "error", *UNKNOWN_STATUSES])
    return actions, statuses


def uuid4(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def slug(rng: random.Random, prefix: str = "", digits: bool = True) -> str:
    """A Neon-style id: "dry-hall-87167252" or "br-yellow-dawn-a5qftt8g"."""
    words = f"{prefix}{rng.choice(ADJ)}-{rng.choice(NOUN)}-"
    if digits:
        return words + str(rng.randrange(10_000_000, 100_000_000))
    return words + "".join(rng.choice(ALNUM) for _ in range(8))


def api_key(rng: random.Random) -> str:
    """64 lowercase alphanumerics, the shape of the platform's keys."""
    return "".join(rng.choice(ALNUM) for _ in range(64))


@dataclass
class Emitted:
    """One operation written by the factory; `next_us` is set when it is still open."""

    index: int
    next_us: int | None


# Episode kinds with weights: availability checks and suspend/start cycles dominate.
_KINDS = ["check", "cycle", "apply", "burst", "branch", "rare", "unknown"]
_WEIGHTS = [0.33, 0.41, 0.05, 0.09, 0.035, 0.07, 0.004]
_CUM = [sum(_WEIGHTS[: i + 1]) / sum(_WEIGHTS) for i in range(len(_WEIGHTS))]
OPS_PER_EPISODE = 1.31  # measured mean of the episode mix, to hit ops_per_project_per_day
OPEN_TAIL_US = 120 * US  # ops this young at the end of the history may still be open


class OpFactory:
    """Writes episodes of operations into one project, all randomness from one RNG."""

    def __init__(
        self,
        project: ProjectData,
        rng: random.Random,
        actions: Interner,
        statuses: Interner,
        names_rng: random.Random | None = None,
    ) -> None:
        self.p = project
        self.rng = rng
        # Names and listing fields draw from their own RNG: the operations of a seed stay the
        # same bytes they were before branches were listed.
        self.names_rng = names_rng or random.Random(f"{project.id}/names")
        self.actions = actions
        self.statuses = statuses
        self.computes: list[tuple[int, int]] = []  # (branch ix, endpoint ix) of each compute
        self.active: dict[int, bool] = {}  # endpoint ix -> running
        self.next_branch_compute(project.born_us)

    def next_branch_compute(self, created_us: int) -> tuple[int, int]:
        """A new branch with its compute (the first one: the default branch), listed from now."""
        rng, p = self.rng, self.p
        branch_id = slug(rng, "br-", digits=False)
        endpoint_id = slug(rng, "ep-", digits=False)
        b = p.branch_ix(branch_id)
        e = p.endpoint_ix(endpoint_id)
        parent = next(iter(p.branch_meta), None)  # branches fork from the default one
        p.branch_meta[branch_id] = new_branch(self.names_rng, branch_id, created_us, parent)
        p.endpoint_meta[endpoint_id] = new_endpoint(
            self.names_rng, endpoint_id, branch_id, created_us
        )
        self.computes.append((b, e))
        self.active[e] = False
        return b, e

    def drop_compute(self, b: int) -> None:
        """A deleted branch: no operation names it or its compute from now on."""
        self.computes = [(cb, ce) for cb, ce in self.computes if cb != b] or self.computes

    def _compute(self) -> tuple[int, int]:
        # The main branch's compute is the busiest one.
        rng = self.rng
        return self.computes[0] if rng.random() < 0.5 else rng.choice(self.computes)

    def episode(self, t_us: int, now_us: int, live: bool) -> list[Emitted]:
        """Emit one episode starting near t_us; now_us decides which ops are still open."""
        rng = self.rng
        kind = _KINDS[bisect(_CUM, rng.random())]
        specs: list[tuple[str, int, int]] = []  # (action, branch ix, endpoint ix or -1)
        if kind == "check":
            b, e = self._compute()
            specs.append(("check_availability", b, e))
        elif kind == "cycle":
            b, e = self._compute()
            running = self.active[e]
            self.active[e] = not running
            specs.append(("suspend_compute" if running else "start_compute", b, e))
            if not running and rng.random() < 0.15:
                specs.append(("apply_config", b, e))
        elif kind == "apply":
            b, e = self._compute()
            specs.append(("apply_config", b, e))
            if rng.random() < 0.3:
                specs.append(("apply_config", *self._compute()))
        elif kind == "burst":
            for _ in range(rng.randint(2, 5)):
                action = "check_availability" if rng.random() < 0.75 else "apply_config"
                specs.append((action, *self._compute()))
        elif kind == "branch":
            if len(self.computes) < 40:
                b, e = self.next_branch_compute(t_us)
            else:
                b, e = rng.choice(self.computes)
            # Branch creation starts create_branch and start_compute (platform-api.md 4.4).
            specs += [("create_branch", b, -1), ("start_compute", b, e)]
            self.active[e] = True
        elif kind == "rare":
            b, e = self._compute()
            if rng.random() < 0.4:
                specs.append((rng.choice(ENDPOINT_RARE), b, e))
            else:
                specs.append((rng.choice(BRANCH_RARE), b, -1))
        else:
            b, e = self._compute()
            specs.append((rng.choice(UNKNOWN_ACTIONS), b, e if rng.random() < 0.5 else -1))
        return self.write(specs, t_us, now_us, live)

    def write(
        self,
        specs: list[tuple[str, int, int]],
        t_us: int,
        now_us: int,
        live: bool,
        status: str | None = None,
    ) -> list[Emitted]:
        """Write ops of one same-second group, each a few microseconds after the previous."""
        p, rng = self.p, self.rng
        created = p.created
        c = t_us if not created or t_us > created[-1] else created[-1] + 1
        second = c // US
        out: list[Emitted] = []
        for action, b, e in specs:
            out.append(self._one(action, b, e, c, now_us, live, status))
            step = rng.randint(1, 400)
            c = c + step if (c + step) // US == second else c + 1
        return out

    def _one(
        self,
        action: str,
        b: int,
        e: int,
        c: int,
        now_us: int,
        live: bool,
        status: str | None,
    ) -> Emitted:
        p, rng = self.p, self.rng
        op_id = uuid4(rng)
        a = self.actions.get(action)
        next_us: int | None = None
        failures = 0
        err: str | None = None
        retry: int | None = None
        extra = rng.random() < 0.002  # rarely a field nobody has listed yet
        if status is not None:
            st, dur, upd = status, 0, c
        elif live or (now_us - c < OPEN_TAIL_US and rng.random() < 0.6):
            # A new operation: compute starts are scheduled, the rest run (platform-api.md 3.1).
            st = "scheduling" if action == "start_compute" else "running"
            dur, upd = 0, c
            if not live:
                u = rng.random()
                if u < 0.15:
                    st, failures, err = "failed", 1, rng.choice(ERRORS)
                    retry = now_us + rng.randint(5, 60) * US
                elif u < 0.2:
                    st = "cancelling"
                dur = max(0, (now_us - c) // 1000 - rng.randint(0, 500))
            next_us = (retry or max(now_us, c)) + int(rng.expovariate(1 / 20.0) * US) + 1
            if not live:
                # Ops still open at an arbitrary instant are the long ones (inspection paradox).
                next_us += 30 * US
        else:
            mean = MEAN_MS.get(action, 2000)
            dur = int(rng.expovariate(1.0 / mean)) + 1
            u = rng.random()
            st = "finished"
            if u < 0.04:  # retried, then finished: failures_count and retry_at remain
                failures = rng.randint(1, 3)
                err = rng.choice(ERRORS)
                retry = c + rng.randint(5, 60) * US
                dur += failures * rng.randint(5_000, 60_000)
            elif u < 0.06:
                st, failures, err = "failed", rng.randint(1, 5), rng.choice(ERRORS)
                retry = c + rng.randint(5, 600) * US
            elif u < 0.07:
                st, err = "error", rng.choice(ERRORS)
            elif u < 0.08:
                st = "cancelled"
            elif u < 0.095:
                st, dur = "skipped", 0
            elif u < 0.0975:
                st = rng.choice(UNKNOWN_STATUSES)
            upd = min(c + dur * 1000, now_us)
        i = p.append(op_id, c, upd, a, self.statuses.get(st), failures, b, e, dur)
        if action != "check_availability":
            p.mark_active(c)
        if err is not None:
            p.error[i] = err
        if retry is not None:
            p.retry_at[i] = retry
        if extra:
            p.extra[i] = {"trace_id": f"{rng.getrandbits(64):016x}"}
        return Emitted(i, next_us)


def generate_history(
    factory: OpFactory, start_us: int, end_us: int, n_target: float
) -> list[Emitted]:
    """Fill [start_us, end_us) with about n_target operations; returns the still-open ones."""
    rng = factory.rng
    if n_target <= 0:
        return []
    mean_gap = (end_us - start_us) / (n_target / OPS_PER_EPISODE)
    rate = 1.0 / mean_gap
    t = start_us
    open_ops: list[Emitted] = []
    episode = factory.episode
    expo = rng.expovariate
    while True:
        t += int(expo(rate)) + 1
        if t >= end_us:
            break
        for em in episode(t, end_us, False):
            if em.next_us is not None:
                open_ops.append(em)
    return open_ops
