"""Pacing on a fake clock: exact send times, route limits, slow-down and Retry-After."""

from __future__ import annotations

from exporter.api.pacing import Pacer


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _pacer(max_rps: float | None, route_rps: float = 40.0) -> tuple[Pacer, FakeTime]:
    t = FakeTime()
    return Pacer(max_rps, route_rps, clock=t.clock, sleep=t.sleep), t


def test_requests_are_spaced_exactly_at_the_rate() -> None:
    pacer, t = _pacer(8.0)
    sent = []
    for _ in range(17):
        pacer.acquire("GET /projects")
        sent.append(t.now)
    assert sent[0] == 100.0
    assert sent[-1] - sent[0] == 2.0  # 16 intervals of 1/8 s


def test_pacing_off_never_waits() -> None:
    pacer, t = _pacer(None)
    for _ in range(1000):
        pacer.acquire("GET /projects")
    assert t.now == 100.0


def test_route_limit_binds_only_above_it() -> None:
    pacer, t = _pacer(100.0, route_rps=40.0)
    for _ in range(41):
        pacer.acquire("GET /projects/{project_id}/operations")
    assert round(t.now - 100.0, 9) == 1.0  # 40 intervals at 40/s, not 100/s
    start = t.now
    pacer.acquire("GET /projects")  # another route is not held back by that one
    assert t.now - start <= 1 / 100.0 + 1e-9


def test_429_slows_down_honours_retry_after_and_recovers() -> None:
    pacer, t = _pacer(10.0)
    pacer.acquire("r")
    pacer.on_throttled(retry_after=3.0)
    assert pacer.current_rps == 7.0
    before = t.now
    pacer.acquire("r")
    assert t.now - before >= 3.0
    for _ in range(200):
        pacer.on_success()
    assert pacer.current_rps == 10.0
