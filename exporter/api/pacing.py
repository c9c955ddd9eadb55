"""Proactive pacing: stay under the account's rate limit instead of bouncing off 429s.

The account allows 700 requests/min shared by every client, the web console included, and
40 requests/s per route (PRODUCT.md). A `Pacer` hands out send times on two timelines, one for
the account and one per route template: each request reserves the next free slot on both and
sleeps once until it. Reserving slots (rather than polling a token count) means sleep overshoot
never accumulates, so a long run keeps the configured rate exactly. A 429 lowers the account
rate and pushes its timeline back by `Retry-After`; successes slowly restore the rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# 8 req/s = 480/min: about two thirds of the 700/min account budget, leaving the rest to the web
# console and other tools of the account (README, "Rate limits").
DEFAULT_MAX_RPS = 8.0
ROUTE_MAX_RPS = 40.0


class Pacer:
    """Account-wide and per-route pacing with multiplicative slow-down on 429."""

    def __init__(
        self,
        max_rps: float | None = DEFAULT_MAX_RPS,
        route_rps: float = ROUTE_MAX_RPS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,  # a stop event's `wait` ends it early
    ):
        # max_rps None or <= 0: pacing off (benchmarks against a simulator without limits).
        self.enabled = bool(max_rps and max_rps > 0)
        self.max_rps = float(max_rps) if self.enabled and max_rps else 0.0
        self.rate = self.max_rps  # current account rate: lowered on 429, restored slowly
        self.route_rps = route_rps
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._account_next = 0.0  # earliest send time of the next request, account-wide
        self._route_next: dict[str, float] = {}
        self._ok_since_backoff = 0

    @property
    def current_rps(self) -> float:
        return self.rate

    def reserve(self, route: str) -> float:
        """Reserve the next send slot for `route`; returns the seconds to wait for it."""
        if not self.enabled:
            return 0.0
        with self._lock:
            now = self._clock()
            slot = max(now, self._account_next, self._route_next.get(route, 0.0))
            self._account_next = slot + 1.0 / self.rate
            if self.route_rps < self.rate:  # the route limit binds only above 40/s
                self._route_next[route] = slot + 1.0 / self.route_rps
            return slot - now

    def acquire(self, route: str) -> None:
        wait = self.reserve(route)
        if wait > 0:
            self._sleep(wait)

    def on_success(self) -> None:
        """Creep back towards max_rps after a slow-down (additive increase)."""
        if not self.enabled or self.rate >= self.max_rps:
            return
        with self._lock:
            self._ok_since_backoff += 1
            if self._ok_since_backoff >= 20:
                self._ok_since_backoff = 0
                self.rate = min(self.max_rps, self.rate + self.max_rps * 0.1)

    def on_throttled(self, retry_after: float | None) -> None:
        """A 429: someone else is using the budget too; slow everyone down."""
        if not self.enabled:
            return
        with self._lock:
            self._ok_since_backoff = 0
            self.rate = max(self.max_rps * 0.1, self.rate * 0.7)
            if retry_after:
                self._account_next = max(self._account_next, self._clock() + retry_after)
