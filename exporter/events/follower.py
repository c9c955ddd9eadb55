"""The events file followed during the run (issue 22): each commit's events appended right
after it, from the rows in hand, so an events backfill costs little more than one without
(bench/README.md, figure 9). The end-of-run delivery (`exporter.events.delivery`) takes over
whatever the follower could not append."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

from exporter.core.layout import appended_whole, write_all
from exporter.events.appender import ChildAppender
from exporter.events.delivery import FileAppendError, deliver_file
from exporter.events.eventsfile import locked
from exporter.events.outbox import Batch, Outbox

__all__ = ["CHILD_EVENTS", "FileFollower"]

log = logging.getLogger("opsaudit.events")

# A commit's events from which the appends go to a child process (`events.appender`): the
# JSON of an events backfill built outside the walks' GIL (bench/README.md, figure 9). Fewer
# are not worth a process (~0.15 s of CPU to start, ~65 MiB).
CHILD_EVENTS = 20_000


class FileFollower:
    """The events file appended right after each commit (bench/README.md, figure 9): the
    commit's outbox rows are in hand, so they are not read back from the state (their JSON is
    built from the columns the chunks kept, `Outbox.pieces`), and their mark rides in the next
    commit's transaction (the last one's in `finish`). Exactly once as in `deliver_file`: an
    append comes after the commit that recorded its events, and a kill between the append and
    its mark is what the tail reconciliation mends. Appends keep commit order (which that
    reconciliation relies on); the last commit's runs on a thread of its own, alongside the end
    of the run (its record and the views database), until `finish`. The follower starts once
    the backlog is in the file; the first failure hands everything left to the end-of-run
    delivery (which says why)."""

    def __init__(self, outbox: Outbox, path: Path, handoff: tuple[int, Path] | None = None) -> None:
        self.outbox = outbox
        self.path = path
        self.on = False
        self.delivered = 0  # events appended and marked in this run
        self._unmarked: tuple[int, int] | None = None  # (after, through) seq: appended, unmarked
        self._marking = 0  # events marked in the open commit's transaction
        self._appending: threading.Event | None = None  # set once the append under way ended
        self._failure: BaseException | None = None  # of an append, other than the file's
        self._handoff = handoff  # the dataset's lock and scratch room, for a child appender
        self._child: ChildAppender | None = None
        self._acking: tuple[int, int] | None = None  # (after, through): the child's, unanswered
        self._child_used = False  # it took an append: it takes every later one (their order)

    def start(self) -> None:
        """Deliver the backlog (torn tail, reconciliation, pending events), then follow."""
        try:
            self.delivered += deliver_file(self.outbox, self.path)
        except OSError as exc:
            if isinstance(exc, FileAppendError):  # what it appended before it failed
                self.delivered += exc.delivered
            log.debug("events file: not followed in this run (%s)", exc.strerror or exc)
            return
        self.on = True

    def mark(self, con: sqlite3.Connection) -> None:
        """Inside a commit's transaction: mark the rows appended after the previous commit."""
        self.wait()
        span = self._unmarked
        self._marking = 0 if span is None else self.outbox.mark_file(con, span[1], span[0])

    def committed(self, batches: list[Batch], alongside: bool = False) -> None:
        """After a commit: its mark is durable; append the events it recorded, here or (the
        last commit's, `alongside`) on a thread of its own. Not the others: while one appends,
        the next commit's events pile up instead of waiting in the walks (a 1.1M-operation
        events backfill peaked at 227 MiB against 177; bench/README.md, figure 9)."""
        self.wait()
        if self._unmarked is not None:
            self.delivered += self._marking
            self._unmarked, self._marking = None, 0
        if not self.on or not batches:
            return
        kept = all(b.rows is not None and b.names is not None and b.facts for b in batches)
        # The child takes the appends from the first commit of many events that is not the
        # last (the walks go on meanwhile); a backfill of one commit keeps its one append on
        # the thread below (alongside the run's end, which would wait for the child's answer).
        if kept and (self._child_used or (not alongside and self._worth_a_child(batches))):
            self._send(batches)  # answered in `wait`: the committer goes on meanwhile
            return
        if not alongside:
            self._write(batches)
            self.wait()  # raises what the append failed with
            return
        # Awaited by an event, not Thread.join: a Ctrl-C in a join takes a live thread for
        # ended (CPython 3.11), and `wait` would then return with the append still going on.
        self._appending = ended = threading.Event()
        threading.Thread(
            target=self._append, args=(batches, ended), name="opsaudit-events-file", daemon=True
        ).start()

    def _append(self, batches: list[Batch], ended: threading.Event) -> None:
        try:
            self._write(batches)
        finally:
            ended.set()

    def _write(self, batches: list[Batch]) -> None:
        try:
            # Under the file's lock: another data directory's runs may append to it too.
            with locked(self.path) as (fd, _), appended_whole(fd):
                # One piece's JSON at a time (`Outbox.pieces`): memory is one piece's.
                for build in (p for batch in batches for p in self.outbox.pieces(batch)):
                    write_all(fd, build())
                os.fsync(fd)
        except OSError as exc:
            self.on = False  # a cut append is mended by the end-of-run delivery
            log.debug("events file: %s; the end-of-run delivery takes over", exc.strerror or exc)
            return
        except BaseException as exc:  # raised by `wait`, in the committer or the run
            self._failure = exc
            return
        self._unmarked = (batches[0].seq - 1, batches[-1].seq)

    def prepare(self) -> None:
        """Start the child appender ahead of an events backfill, while the walks begin: its
        start (~0.15 s of CPU) is then not on the way of the first append it takes."""
        if self._handoff is None or self._child is not None:
            return
        try:
            self._child = ChildAppender(self.path, *self._handoff)
        except OSError as exc:
            log.debug("events file: no child appender (%s)", exc)

    def _worth_a_child(self, batches: list[Batch]) -> bool:
        events = sum(b.rows.num_rows for b in batches if b.rows is not None)
        return self._handoff is not None and events >= CHILD_EVENTS

    def _send(self, batches: list[Batch]) -> None:
        """The batches' events to the child appender (each batch keeps its rows)."""
        try:
            if self._child is None:
                assert self._handoff is not None
                self._child = ChildAppender(self.path, *self._handoff)
            self._child.append([p for batch in batches for p in self.outbox.piece_rows(batch)])
            self._child_used = True
        except OSError as exc:
            self._child_gone(exc)
            return
        except BaseException as exc:  # raised by `wait`, in the committer or the run
            self._failure = exc
            self.close()
            return
        self._acking = (batches[0].seq - 1, batches[-1].seq)

    def _child_gone(self, exc: OSError) -> None:
        self.on = False  # what it cut is mended by the end-of-run delivery
        self.close()
        log.debug("events file: %s; the end-of-run delivery takes over", exc)

    def close(self) -> None:
        """The child appender, if any, ended (what it was sent is in the file)."""
        child, self._child = self._child, None
        if child is not None:
            child.close()

    def wait(self) -> None:
        """Until the append under way (if any) is done; raises what it failed with, but for
        the file's own errors (the end-of-run delivery takes those over)."""
        if self._appending is not None:
            self._appending.wait()
            self._appending = None
        if self._acking is not None:
            span, self._acking = self._acking, None
            try:
                assert self._child is not None
                self._child.ack()
            except OSError as exc:
                self._child_gone(exc)
            else:
                self._unmarked = span
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def finish(self) -> None:
        """After the last commit: wait for its append, then mark it; the child appender ends."""
        self.wait()
        self.close()
        if self._unmarked is not None:
            with self.outbox.state.transaction() as con:
                self.mark(con)
            self.committed([])
