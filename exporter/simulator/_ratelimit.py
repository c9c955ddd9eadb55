"""Sliding-window rate limits: per account per minute and per route per second.

Only admitted requests enter the windows: a 429 costs the client time, not quota, as with a
token-bucket gateway. Otherwise a client that retries too eagerly would never get through,
and a well-paced client (what opsaudit must be, PRODUCT.md property 6) sees no difference.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

from exporter.simulator._config import RateLimits


class RateLimiter:
    """Admits or rejects requests; answers how long until the blocking window has room."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._account: deque[float] = deque()
        self._routes: dict[str, deque[float]] = {}

    def reset(self) -> None:
        with self._lock:
            self._account.clear()
            self._routes.clear()

    def admit(self, limits: RateLimits, route: str, now: float | None = None) -> float | None:
        """None when admitted (and recorded); else the seconds to wait before a retry fits."""
        if not limits.enabled:
            return None
        now = time.monotonic() if now is None else now
        minute = 60.0 / limits.time_scale
        second = 1.0 / limits.time_scale
        with self._lock:
            acc = self._account
            while acc and acc[0] <= now - minute:
                acc.popleft()
            rq = self._routes.setdefault(route, deque())
            while rq and rq[0] <= now - second:
                rq.popleft()
            wait = 0.0
            if len(acc) >= limits.per_minute:
                wait = max(wait, acc[len(acc) - limits.per_minute] + minute - now)
            if len(rq) >= limits.per_route_per_second:
                wait = max(wait, rq[len(rq) - limits.per_route_per_second] + second - now)
            if wait > 0:
                return wait
            acc.append(now)
            rq.append(now)
            return None


def retry_after_header(wait: float, time_scale: float = 1.0) -> str:
    """Whole seconds, at least 1 (the header has no fractions). Under a time scale the header
    is scaled too, with a fraction: a whole second would stand for `time_scale` seconds of the
    simulated clock and distort every benchmark that runs faster than real time."""
    if time_scale == 1.0:
        return str(max(1, math.ceil(wait)))
    return f"{max(wait, 1.0 / time_scale):.3f}"
