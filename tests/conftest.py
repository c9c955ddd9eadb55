"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to loopback only: no proxies, no real key, no env defaults leaking in."""
    for name in list(os.environ):
        if name.upper() in _PROXY_VARS or name.startswith("OPSAUDIT_") or name == "NEON_API_KEY":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def forget_registered_secrets() -> Iterator[None]:
    """A key registered by one test's in-process sync is redacted from every later text of the
    process: a test that used the key "k" turned another test's "check" into "chec[REDACTED]"."""
    from exporter.core import errors as _errors

    before = set(_errors._SECRETS)
    yield
    with _errors._SECRETS_LOCK:
        _errors._SECRETS.intersection_update(before)


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Any]]:
    """`make_sim(**SimConfig fields)`: a started simulator on loopback, stopped after the test.
    tests/ops overrides it to add its defaults; tests/simulator has its own."""
    from exporter.simulator import SimConfig, Simulator

    started: list[Simulator] = []

    def factory(**kwargs: Any) -> Simulator:
        sim = Simulator(SimConfig(**kwargs)).start()
        started.append(sim)
        return sim

    yield factory
    for sim in started:
        sim.stop()
