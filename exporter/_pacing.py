"""Proactive pacing: stay under the account's rate limit instead of bouncing off 429s.

The account allows 700 requests/min shared by every client, the web console included, and
40 requests/s per route (PRODUCT.md). One `Pacer` per run holds an account-wide token bucket
and one bucket per route template; a 429 lowers the account rate, successes slowly restore it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# 8 req/s = 480/min: about two thirds of the 700/min account budget, leaving the rest to the web
# console and other tools of the account (README, "Rate limits").
DEFAULT_MAX_RPS = 8.0
ROUTE_MAX_RPS = 40.0


class TokenBucket:
    """A thread-safe token bucket; `acquire` blocks until a token is free."""

    def __init__(
        self,
        rate: float,
        burst: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._tokens = self.burst
        self._clock = clock
        self._sleep = sleep
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def acquire(self) -> float:
        """Take one token, waiting as needed; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                self._refill(now)
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return waited
                delay = (1.0 - self._tokens) / self.rate
            self._sleep(delay)
            waited += delay

    def hold(self, seconds: float) -> None:
        """Make every caller wait `seconds` from now (a 429's Retry-After applies to all)."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._tokens = min(self._tokens, 0.0) - seconds * self.rate
            self._last = now


class Pacer:
    """Account-wide and per-route pacing with multiplicative slow-down on 429."""

    def __init__(self, max_rps: float | None = DEFAULT_MAX_RPS, route_rps: float = ROUTE_MAX_RPS):
        # max_rps None or <= 0: pacing off (benchmarks against a simulator without limits).
        self.enabled = bool(max_rps and max_rps > 0)
        self.max_rps = float(max_rps) if self.enabled and max_rps else 0.0
        self._account = TokenBucket(self.max_rps) if self.enabled else None
        self._route_rps = min(route_rps, self.max_rps) if self.enabled else route_rps
        self._routes: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()
        self._ok_since_backoff = 0

    @property
    def current_rps(self) -> float:
        return self._account.rate if self._account else 0.0

    def acquire(self, route: str) -> None:
        if not self._account:
            return
        with self._lock:
            bucket = self._routes.get(route)
            if bucket is None:
                bucket = self._routes[route] = TokenBucket(self._route_rps)
        bucket.acquire()
        self._account.acquire()

    def on_success(self) -> None:
        """Creep back towards max_rps after a slow-down (additive increase)."""
        if not self._account or self._account.rate >= self.max_rps:
            return
        with self._lock:
            self._ok_since_backoff += 1
            if self._ok_since_backoff >= 20:
                self._ok_since_backoff = 0
                self._account.rate = min(self.max_rps, self._account.rate + self.max_rps * 0.1)

    def on_throttled(self, retry_after: float | None) -> None:
        """A 429: someone else is using the budget too; slow everyone down."""
        if not self._account:
            return
        with self._lock:
            self._ok_since_backoff = 0
            self._account.rate = max(self.max_rps * 0.1, self._account.rate * 0.7)
        if retry_after:
            self._account.hold(retry_after)
