"""One thread that cuts network attempts short: past their deadline, or all at once on a stop.

A socket timeout bounds each wait for bytes, not an attempt: an answer trickled a byte a second
holds a request for ever (a webhook's POST, an API page), and with it the run, its lock and the
next cron run (exit 4). And a run told to stop (Ctrl-C, SIGTERM) should not wait for a request
in flight. The watchdog shuts the attempt's socket: the blocked read returns at once and the
caller, seeing `fired`, says why. One thread for every attempt of a client: a timer per attempt
would cost more than its request.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

# How often a watchdog given a `stop` event looks at it while attempts are under way (an Event
# cannot wake a Condition's waiter): a stopped run's requests end within this.
STOP_POLL = 0.1


@dataclass(eq=False)
class Watch:
    """One attempt under the watchdog."""

    deadline: float  # time.monotonic()
    sock: socket.socket | None = None  # once connected
    fired: bool = False  # cut: the deadline passed, or the stop was set, while it ran
    by_cutoff: bool = False  # its deadline is the caller's cutoff, sooner than the timeout
    # Begun once the stop was set: the caller's own check refuses it (one place, no race with
    # this thread); the stop cuts the attempts under way when it came.
    after_stop: bool = False


class Watchdog:
    """Shuts the socket of each attempt past `timeout` seconds (or past `cutoff()`, a monotonic
    time, when that is sooner), and of every attempt under way when `stop` is set."""

    def __init__(
        self,
        timeout: float,
        stop: threading.Event | None = None,
        name: str = "opsaudit-watchdog",
    ) -> None:
        self.timeout = timeout
        self.stop = stop
        self._cond = threading.Condition()
        self._watches: set[Watch] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watch(self, cutoff: float | None = None) -> Iterator[Watch]:
        deadline = time.monotonic() + self.timeout
        by_cutoff = cutoff is not None and cutoff < deadline
        watch = Watch(
            cutoff if cutoff is not None and by_cutoff else deadline,
            by_cutoff=by_cutoff,
            after_stop=self.stopped,
        )
        with self._cond:
            self._watches.add(watch)
            self._cond.notify()  # its deadline may be the soonest; a stop is looked for now
        try:
            yield watch
        finally:
            with self._cond:  # from here on the watchdog leaves its socket alone
                self._watches.discard(watch)

    @property
    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                stopped = self.stopped
                for watch in self._watches:
                    cut = stopped and not watch.after_stop
                    if not watch.fired and (cut or watch.deadline <= now):
                        watch.fired = True
                        if watch.sock is not None:
                            # socket.socket's: an SSLSocket's own drops its TLS state.
                            with contextlib.suppress(OSError):
                                socket.socket.shutdown(watch.sock, socket.SHUT_RDWR)
                waiting = [w.deadline for w in self._watches if not w.fired]
                if not waiting:
                    self._cond.wait()  # woken by the next watch, or by close()
                    continue
                wait = min(waiting) - now
                if self.stop is not None:
                    wait = min(wait, STOP_POLL)
                self._cond.wait(wait)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()


__all__ = ["STOP_POLL", "Watch", "Watchdog"]
