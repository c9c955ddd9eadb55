"""Live mode: the clock advances, open operations progress and new ones arrive."""

from __future__ import annotations

import math
import random
from typing import Protocol

from exporter.simulator._generate import ERRORS, OPS_PER_EPISODE, OpFactory
from exporter.simulator._model import Interner, ProjectData
from exporter.simulator._timefmt import US


class World(Protocol):
    """What live mode reads and moves of `_world.World` (which calls it: a protocol here, so
    the two modules do not import each other)."""

    live_rng: random.Random
    live_rate: float
    projects: list[ProjectData]
    open_ops: dict[int, int]
    statuses: Interner

    def factory(self, p: ProjectData) -> OpFactory: ...


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 50:  # normal approximation: exact enough, and O(1)
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, prod = math.exp(-lam), 0, rng.random()
    while prod > limit:
        k += 1
        prod *= rng.random()
    return k


def arrivals(world: World, old_us: int, new_us: int) -> None:
    """New operations in (old_us, new_us], some in same-second bursts, all starting open."""
    rng = world.live_rng
    lam = world.live_rate * (new_us - old_us) / (3600 * US)
    for p in world.projects:
        if p.deleted or p.quiet:
            continue
        n = _poisson(rng, lam / OPS_PER_EPISODE)
        times = sorted(rng.randint(old_us + 1, new_us) for _ in range(n))
        factory = world.factory(p)
        for t in times:
            for em in factory.episode(t, new_us, True):
                if em.next_us is not None:
                    world.open_ops[(p.index << 32) | em.index] = em.next_us


def progress(world: World, new_us: int) -> None:
    """Run every open operation's state machine up to new_us (deterministic order: by key).

    scheduling -> running | finished | skipped; running -> finished | failed | cancelling;
    failed -> running at retry_at (failures_count grows); cancelling -> cancelled.
    Some events of a running op only grow total_duration_ms and keep updated_at.
    """
    rng = world.live_rng
    statuses = world.statuses
    sv = statuses.values
    done: list[int] = []
    for code in sorted(world.open_ops):
        p = world.projects[code >> 32]
        i = code & 0xFFFFFFFF
        if p.deleted:
            done.append(code)
            continue
        t = world.open_ops[code]
        changed = False
        while t <= new_us:
            changed = True
            st = sv[p.status[i]]
            nxt: str
            if st == "scheduling":
                u = rng.random()
                nxt = "running" if u < 0.6 else ("finished" if u < 0.95 else "skipped")
            elif st == "running":
                u = rng.random()
                # Retries succeed more often as failures accumulate: every op ends eventually.
                p_fail = 0.25 / (1 + p.failures[i])
                if u < 0.2:
                    # Progress reported without a new updated_at: the in-place change a
                    # recorded real operation showed (PRODUCT.md).
                    p.duration[i] = max(p.duration[i], (t - p.created[i]) // 1000)
                    t += int(rng.expovariate(1 / 15.0) * US) + 1
                    continue
                nxt = "failed" if u < 0.2 + p_fail else "finished"
                if u > 0.97:
                    nxt = "cancelling"
            elif st == "cancelling":
                nxt = "cancelled"
            else:  # failed, error and unknown statuses are retried
                nxt = "running"
            p.status[i] = statuses.get(nxt)
            p.updated[i] = t
            p.duration[i] = max(p.duration[i], (t - p.created[i]) // 1000)
            if nxt == "failed":
                p.failures[i] += 1
                p.error[i] = rng.choice(ERRORS)
                retry = t + rng.randint(2, 30) * US
                p.retry_at[i] = retry
                t = retry
            elif nxt in ("finished", "cancelled", "skipped"):
                done.append(code)
                break
            else:
                t += int(rng.expovariate(1 / 15.0) * US) + 1
        else:
            world.open_ops[code] = t
        if changed:
            p.rendered[i] = None
    for code in done:
        world.open_ops.pop(code, None)
