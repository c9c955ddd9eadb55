"""Rate-limit windows (time-scaled) with and without Retry-After, and each injected fault."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from exporter.simulator import Faults, RateLimits
from exporter.simulator._ratelimit import RateLimiter

from .conftest import api


def test_sliding_windows_exactly() -> None:
    limiter = RateLimiter()
    limits = RateLimits(enabled=True, per_minute=5, per_route_per_second=3, time_scale=1.0)
    assert [limiter.admit(limits, "a", now=0.1 * i) for i in range(3)] == [None] * 3
    assert limiter.admit(limits, "a", now=0.3) == pytest.approx(0.7)  # route window: 1 s
    assert limiter.admit(limits, "b", now=0.3) is None
    assert limiter.admit(limits, "b", now=0.4) is None
    assert limiter.admit(limits, "c", now=0.5) == pytest.approx(59.5)  # account: 5 per minute
    assert limiter.admit(limits, "c", now=60.0) is None  # the first request left the window
    scaled = RateLimits(enabled=True, per_minute=2, per_route_per_second=40, time_scale=60.0)
    fresh = RateLimiter()
    assert fresh.admit(scaled, "a", now=0.0) is None
    assert fresh.admit(scaled, "a", now=0.1) is None
    assert fresh.admit(scaled, "a", now=0.2) == pytest.approx(0.8)  # "minute" = 1 s


@pytest.mark.parametrize("retry_after", [True, False])
def test_429_over_http(make_sim: Any, retry_after: bool) -> None:
    sim = make_sim(seed=1, projects=1)
    sim.rate_limits = RateLimits(
        enabled=True, per_minute=6, per_route_per_second=100, retry_after=retry_after, time_scale=60
    )
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        codes = [client.get(f"/projects/{pid}/operations/x").status_code for _ in range(6)]
        assert codes == [404] * 6  # rejected-by-app requests still use quota
        r = client.get(f"/projects/{pid}/operations", params={"limit": 1})
        assert r.status_code == 429
        assert r.json()["message"] == "rate limit exceeded, retry later"
        # Scaled like the window (the scaled minute lasts 1 s), with a fraction.
        header = r.headers.get("Retry-After")
        assert (header is None) == (not retry_after)
        assert header is None or 0.9 <= float(header) <= 1.0
        time.sleep(1.05)  # the scaled minute has passed
        assert client.get(f"/projects/{pid}/operations", params={"limit": 1}).status_code == 200
    stats = sim.stats()
    assert stats["responses_429"] == 1 and stats["by_status"]["429"] == 1


def test_per_route_limit_over_http(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=1)
    sim.rate_limits = RateLimits(enabled=True, per_minute=700, per_route_per_second=3)
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        codes = [client.get(f"/projects/{pid}/operations").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        # Another route has its own window.
        assert client.get(f"/projects/{pid}").status_code == 200
    sim.rate_limits = RateLimits()
    with api(sim, sim.personal_key) as client:
        assert client.get(f"/projects/{pid}/operations").status_code == 200


def test_each_fault_is_observable_and_counted(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=1)
    pid = sim.project_ids()[0]
    url = f"/projects/{pid}/operations"
    sim.faults = Faults(p_5xx=1.0, seed=1)
    with api(sim, sim.personal_key) as client:
        codes = set()
        for _ in range(12):
            r = client.get(url)
            assert r.headers["content-type"] == "text/html"
            assert f"<h1>{r.status_code} " in r.text
            codes.add(r.status_code)
        assert codes == {502, 503, 504}
    sim.faults = Faults(p_drop=1.0)
    with api(sim, sim.personal_key) as client, pytest.raises(httpx.RemoteProtocolError):
        client.get(url)
    sim.faults = Faults(p_truncate=1.0)
    with api(sim, sim.personal_key) as client, pytest.raises(httpx.RemoteProtocolError):
        client.get(url)
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.15)
    with api(sim, sim.personal_key) as client:
        started = time.monotonic()
        assert client.get(url).status_code == 200
        assert time.monotonic() - started >= 0.15
    sim.faults = Faults()
    assert sim.stats()["faults"] == {"5xx": 12, "drop": 1, "truncate": 1, "slow": 1}
    sim.reset_stats()
    assert sim.stats()["requests"] == 0


def test_fault_draws_are_reproducible(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=1)
    pid = sim.project_ids()[0]

    def statuses() -> list[int]:
        sim.faults = Faults(p_5xx=0.5, seed=9)
        with api(sim, sim.personal_key) as client:
            return [client.get(f"/projects/{pid}").status_code for _ in range(20)]

    first = statuses()
    assert first == statuses() and 200 in first and len(set(first)) > 1


def test_stats_over_http(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=1)
    pid = sim.project_ids()[0]
    sim.reset_stats()
    with api(sim, sim.personal_key) as client:
        client.get(f"/projects/{pid}/operations", params={"limit": 2})
        client.get(f"/projects/{pid}/operations/nope")
    with httpx.Client(base_url=sim.root_url) as raw:
        stats = raw.get("/_sim/stats").json()
        assert stats == sim.stats()
        assert stats["requests"] == 2
        assert stats["by_route"] == {
            "GET /projects/{project_id}/operations": 1,
            "GET /projects/{project_id}/operations/{operation_id}": 1,
        }
        assert stats["by_status"] == {"200": 1, "404": 1}
        assert raw.post("/_sim/reset").status_code == 200
    assert sim.stats()["requests"] == 0
