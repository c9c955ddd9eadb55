"""Fixtures for the simulator tests: simulators on loopback and an httpx client per key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from exporter.simulator import SimConfig, Simulator


@pytest.fixture(scope="module")
def default_sim() -> Iterator[Simulator]:
    """The default world, read-only: tests that mutate use make_sim."""
    with Simulator(SimConfig()) as sim:
        yield sim


@pytest.fixture
def make_sim(make_sim: Callable[..., Any]) -> Callable[..., Any]:
    """tests/conftest.py's make_sim with a small default world (1 day, 100 ops per project)."""

    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("ops_per_project_per_day", 100)
        kwargs.setdefault("days", 1)
        return make_sim(**kwargs)

    return factory


def api(sim: Simulator, key: str | None = None) -> httpx.Client:
    """A keep-alive client on the simulator's base URL, authenticated with `key`."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=sim.base_url, headers=headers, timeout=10)


def walk(client: httpx.Client, project_id: str, limit: int | None) -> list[dict[str, Any]]:
    """Every page of a project's operations, following cursors until an empty page."""
    pages: list[dict[str, Any]] = []
    params: dict[str, Any] = {} if limit is None else {"limit": limit}
    while True:
        r = client.get(f"/projects/{project_id}/operations", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append(body)
        if not body["operations"] or limit is None:
            return pages
        params = {"limit": limit, "cursor": body["pagination"]["cursor"]}
