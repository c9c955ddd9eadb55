"""Configuration records of the simulator: the world, injected faults and rate limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PastEnd = Literal["empty_with_pagination", "empty_without_pagination"]


@dataclass(frozen=True)
class SimConfig:
    """What world to generate and where to serve it (same seed + config => same bytes)."""

    seed: int = 0
    projects: int = 5  # projects in the user's organizations (shared projects come on top)
    days: float = 7.0  # history length before the starting clock
    ops_per_project_per_day: int = 500
    orgs: int = 2  # organizations the default user belongs to; projects go round-robin
    # Projects of a foreign organization shared with the default user (GET /projects/shared).
    shared_projects: int = 2
    # What a page past the end looks like: PRODUCT.md says it is undocumented, so both exist.
    past_end: PastEnd = "empty_with_pagination"
    # Whether an operations cursor includes the operation it names (undocumented, issue 9
    # finding 12): True repeats the previous page's last operation first on the next page.
    inclusive_cursor: bool = False
    # The largest `limit` GET /projects accepts: 400 per the OpenAPI document, 100 per the
    # pagination guide (PRODUCT.md); above it the answer is 400 Bad Request.
    projects_max_limit: int = 400
    # The most projects one page of GET /projects holds, whatever `limit` asks (None: `limit`):
    # a server paging at the guide's 100, or at the default 10 (PRODUCT.md), below the limit.
    projects_page: int | None = None
    # The most branches one page of GET /projects/{id}/branches holds, whatever `limit` asks.
    branches_page: int = 10_000
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    start: str = "2025-01-16T21:00:00Z"  # the virtual clock at start = the end of the history
    # Arrivals per project per hour while the clock advances; None: the history's own rate.
    live_ops_per_project_per_hour: float | None = None


@dataclass(frozen=True)
class Faults:
    """Per-request fault probabilities, drawn from their own RNG seeded with `seed`."""

    p_5xx: float = 0.0  # 502/503/504 with an HTML body, as a gateway sends it
    p_drop: float = 0.0  # close the connection without any response
    p_slow: float = 0.0  # sleep `slow_seconds` before answering
    slow_seconds: float = 0.5
    p_truncate: float = 0.0  # full Content-Length, part of the body, then close
    # > 0: every body is sent a byte at a time, this many seconds apart (no silence a read
    # timeout would see: only a bound on the whole attempt ends it).
    trickle_seconds: float = 0.0
    # The server's clock (its Date header) against this host's, in seconds (negative: behind).
    clock_skew_seconds: float = 0.0
    seed: int = 1


@dataclass(frozen=True)
class RateLimits:
    """The account's limits (platform-api.md section 8); windows are divided by `time_scale`."""

    enabled: bool = False
    per_minute: int = 700  # sliding window over the whole account (the simulator = one account)
    per_route_per_second: int = 40  # sliding window per route template
    retry_after: bool = True  # send `Retry-After` on 429 (PRODUCT.md: it may be missing)
    time_scale: float = 1.0  # 60 => the "minute" lasts one real second
