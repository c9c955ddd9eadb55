"""A run's budget: when it stops starting new work (`--time-budget`, `--max-requests`).

A large account cannot be walked in full every five minutes (10,000 projects at 700 requests a
minute take 14 minutes at least), so a run may be bounded. Every request the walks are about to
send takes one unit first; once the deadline passes or the units run out, the walks stop where
they are, commit what they read (a walk cut short resumes from its cursor next time) and the run
ends with outcome `budget`. Every attempt counts, a retry (429, 5xx) included: a retry the
units no longer cover gives its request up as a spent budget does (`take_retry`), and the run
never sends more than --max-requests (but for a projects listing larger than it: exit 2 after).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Budget:
    """Thread-safe: the run's walks share one."""

    def __init__(
        self,
        seconds: float | None = None,
        requests: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        stop: threading.Event | None = None,
    ):
        self._clock = clock
        # Set from a signal handler (Ctrl-C, SIGTERM): no new request from then on, like a
        # spent budget (issue 19, finding 15). Read without the lock: the handler never waits.
        self.stop = stop
        self.deadline = None if seconds is None else clock() + seconds
        self.requests_left = requests
        self.reached = False
        # Work worth doing only whole (`reserve`) was left for a later run: the run did not
        # cover everything, even if no single request was refused (outcome `budget`).
        self.fell_short = False
        # The longest retry wait given up because it would end past the deadline (seconds): a
        # throttled run then ends early, and its summary says why.
        self.wait_given_up = 0.0
        # Retries given up because --max-requests no longer covered them: the summary says so.
        self.retries_given_up = 0
        self._lock = threading.Lock()

    @property
    def bounded(self) -> bool:
        return self.deadline is not None or self.requests_left is not None

    def spend(self, requests: int) -> None:
        """Count requests made outside the walks (the listing's attempts, retries included)."""
        with self._lock:
            if self.requests_left is not None:
                self.requests_left -= requests

    def reserve(self, n: int) -> Reservation | None:
        """Take `n` requests at once, or none (None): work worth doing only whole, like a
        project's two names listings. When the room for them was only checked, the other walks'
        pages took it in between: the second listing was refused, the first spent for nothing,
        run after run at a small --max-requests (a new user's first hour)."""
        with self._lock:
            fits = self._fits(n)
            self.fell_short = self.fell_short or not fits
            if not fits:
                return None
            if self.requests_left is not None:
                self.requests_left -= n
            return Reservation(self, n)

    def _fits(self, n: int) -> bool:
        return (
            not self.reached
            and (self.deadline is None or self._clock() < self.deadline)
            and (self.requests_left is None or self.requests_left >= n)
        )

    def _give_back(self, n: int) -> None:
        with self._lock:
            if self.requests_left is not None:
                self.requests_left += n

    def take(self) -> bool:
        """One request may be sent (True), or the budget is spent (False, from then on). A
        stopped run's requests are refused by its client (`ApiClient.stop`)."""
        with self._lock:
            if self.reached:
                return False
            if (self.deadline is not None and self._clock() >= self.deadline) or (
                self.requests_left is not None and self.requests_left <= 0
            ):
                self.reached = True
                return False
            if self.requests_left is not None:
                self.requests_left -= 1
            return True

    def take_retry(self, unspent: int | None = None) -> bool:
        """One more attempt of a request already sent (a retry) may be sent (True, one unit
        taken), or --max-requests no longer covers it (False: the request is given up, the
        budget reached). Retries were not counted: with every page answering 500, a run of
        --max-requests 12 sent 68 requests on the account's shared 700/min. `unspent`: the
        requests sent so far and not yet taken (the projects listing's, retries included,
        `spend`-ed once it ends): the retry must fit besides them, and takes nothing now."""
        with self._lock:
            if self.requests_left is None:
                return True
            if self.requests_left - (unspent or 0) <= 0:
                self.reached = True
                self.retries_given_up += 1
                return False
            if unspent is None:
                self.requests_left -= 1
            return True

    def outlasted_by(self, seconds: float) -> bool:
        """Whether a wait of `seconds` (a retry's backoff, a `Retry-After`) ends past the
        deadline, or the run was stopped: the request is then given up as a spent budget's
        would be. Retries ignored the deadline: a 5 s --time-budget took 61 s under a minute's
        Retry-After, and a cron job overran into its next start (exit 4, lock held)."""
        if self.stopped:
            return True
        before = self._clock()
        if not self._past_deadline(seconds):
            return False
        if self.deadline is not None and before < self.deadline:  # the wait is what passes it
            with self._lock:
                self.wait_given_up = max(self.wait_given_up, seconds)
        return True

    def _past_deadline(self, wait: float = 0.0) -> bool:
        """Whether the deadline has passed (or will have, after `wait` seconds): then the budget
        is reached, the run did not cover everything (outcome `budget`)."""
        if self.deadline is None or self._clock() + wait < self.deadline:
            return False
        with self._lock:
            self.reached = True
        return True

    @property
    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()


class Reservation:
    """Requests taken from a budget at once (`Budget.reserve`): each `take` is one of them;
    `release` gives back those not sent (the first listing failed, the run stopped)."""

    def __init__(self, budget: Budget, requests: int):
        self.budget = budget
        self.left = requests

    def take(self) -> bool:
        """One reserved request may be sent: a run stopped (Ctrl-C) sends none, and time is not
        reserved (past --time-budget's deadline, none either)."""
        if self.left <= 0 or self.budget.stopped or self.budget._past_deadline():
            return False
        self.left -= 1
        return True

    def release(self) -> None:
        if self.left:
            self.budget._give_back(self.left)
            self.left = 0


UNBOUNDED = Budget()

__all__ = ["UNBOUNDED", "Budget", "Reservation"]
