"""A simulator of the platform's management API, served over real HTTP on loopback."""

from __future__ import annotations

from exporter.simulator._config import Faults, RateLimits, SimConfig
from exporter.simulator._sim import Simulator

__all__ = ["Faults", "RateLimits", "SimConfig", "Simulator"]
