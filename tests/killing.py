"""A kill -9 instant drawn at random, within the length of the runs the test actually sees."""

from __future__ import annotations

import random


class KillWindow:
    """Draws the delay before a kill from (low, window). The window shrinks below a delay that a
    run outlived (it finished first) and grows again after a kill: a backfill is long and an
    incremental run short, and a fast machine must not let most runs escape their kill (a fixed
    window of 0.3-2 s let 32 of 40 runs escape on CI)."""

    def __init__(self, rng: random.Random, low: float, high: float) -> None:
        self.rng, self.low, self.high = rng, low, high
        self.window = high
        self._delay = low

    def delay(self) -> float:
        self._delay = self.rng.uniform(self.low, self.window)
        return self._delay

    def killed(self, killed: bool) -> None:
        """Tell the outcome of the last delay: the run was killed, or it had already ended."""
        if killed:
            self.window = min(self.high, 1.25 * self.window)
        else:
            self.window = max(self.low + 0.05, 0.8 * self._delay)
