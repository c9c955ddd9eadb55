"""Fixtures shared by every test package."""

from __future__ import annotations

import os

import pytest

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to loopback only: no proxies, no real key, no env defaults leaking in."""
    for name in list(os.environ):
        if name.upper() in _PROXY_VARS or name.startswith("OPSAUDIT_") or name == "NEON_API_KEY":
            monkeypatch.delenv(name, raising=False)
