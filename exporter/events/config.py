"""What a run's events go to and which they are (issue 22): `EventsConfig`, `--events-filter`,
and the backlog the outbox reports (`status`, `check`, metrics)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter.core.errors import ConfigError, check_type
from exporter.core.model import DOCUMENTED_ACTIONS, DOCUMENTED_STATUSES
from exporter.core.pathcheck import plain_path

if TYPE_CHECKING:  # the commands that read the backlog (status, check) load no pyarrow
    import pyarrow as pa

__all__ = [
    "DONE_SQL",
    "SINKS",
    "WAITING_SQL",
    "Backlog",
    "EventFilter",
    "EventsConfig",
    "discard_backlog",
    "parse_event_filter",
    "read_backlog",
    "undocumented",
]

SINKS = ("file", "webhook")
# Per sink: how many of a batch's events still wait for it (NULL: the batch is not for it).
WAITING_SQL = {"file": "events - file_done", "webhook": "webhook_left"}


@dataclass(frozen=True)
class EventFilter:
    """One `--events-filter`: `field=v1,v2` keeps events whose field is one of the values,
    `field!=v1,v2` drops them. Fields: `action`, `status`."""

    text: str
    field: str
    negate: bool
    values: frozenset[str]

    def mask(self, table: pa.Table) -> pa.ChunkedArray:
        import pyarrow as pa
        import pyarrow.compute as pc

        hit = pc.fill_null(
            pc.is_in(table[self.field], value_set=pa.array(sorted(self.values), pa.string())),
            False,
        )
        return pc.invert(hit) if self.negate else hit


_FILTER = re.compile(r"^\s*(action|status)\s*(!=|=)\s*([^=!]+)$")


def parse_event_filter(text: str) -> EventFilter:
    """Parse `action=start_compute,suspend_compute` or `status!=finished`; `ConfigError` else."""
    check_type("an event filter", text, str, "a str such as 'status=failed,error'")
    m = _FILTER.match(text)
    values = frozenset(v.strip() for v in m[3].split(",") if v.strip()) if m else frozenset()
    if not m or not values:
        raise ConfigError(
            f"--events-filter {text!r} is not a filter: write FIELD=V1,V2 or FIELD!=V1,V2 with "
            "FIELD action or status (e.g. status=failed,error)"
        )
    return EventFilter(text.strip(), m[1], m[2] == "!=", values)


def undocumented(event_filter: EventFilter) -> tuple[list[str], tuple[str, ...]]:
    """The filter's values the API does not document for its field (a typo, most likely:
    `status=faild` kept every event out, for good; a value the API added since is fine), and
    the documented ones."""
    known = DOCUMENTED_ACTIONS if event_filter.field == "action" else DOCUMENTED_STATUSES
    return sorted(event_filter.values - set(known)), known


@dataclass
class EventsConfig:
    """Where a run's events go (the CLI builds it from `--events-file`, `--webhook`, ...)."""

    file: Path | None = None  # JSON Lines, appended
    webhook_url: str | None = field(default=None, repr=False)  # its query may hold a token
    webhook_key: bytes | None = field(default=None, repr=False)  # the decoded whsec_ secret
    backfill: bool = False  # also the rows of a project's first walk
    filters: Sequence[EventFilter] = ()  # all must hold
    webhook_timeout: float = 10.0  # seconds per attempt
    webhook_attempts: int = 6  # per event and run: 0.5 + 1 + 2 + 4 + 8 s of backoff between them
    webhook_backoff: float = 0.5  # the first wait; doubles, at most 30 s
    webhook_lanes: int = 4  # events in flight at once (one operation's always in one lane)

    def __post_init__(self) -> None:
        # A notebook's types: webhook_key="whsec_..." (text, not the decoded key) reached the
        # delivery's HMAC, which takes bytes only; a str file is taken as the Path it names.
        if isinstance(self.file, str):
            self.file = Path(self.file)
        else:
            self.file = plain_path(self.file)  # (a bytes path left as it is: refused below)
        check_type("file", self.file, (Path, type(None)), "a Path (or str) or None")
        check_type("webhook_url", self.webhook_url, (str, type(None)), "a str or None")
        reader = "exporter.events.webhook.read_webhook_secret(path)"
        secret = f"bytes (the decoded whsec_ secret: {reader} reads one)"
        check_type(
            "webhook_key",
            self.webhook_key,
            (bytes, bytearray, memoryview, type(None)),
            f"{secret} or None",
        )
        if isinstance(self.webhook_key, (bytearray, memoryview)):
            self.webhook_key = bytes(self.webhook_key)  # the HMAC's, and never changed under it
        # What the CLI refuses (`cli/_events.py`), a notebook's config too, before anything is
        # read: a webhook without its secret was never delivered (each run "waiting", exit 0);
        # a filter given as text failed the run's commits ("'str' object has no attribute
        # 'mask'", exit 6).
        if self.webhook_url is not None and not self.webhook_key:
            raise ConfigError(
                "EventsConfig: a webhook_url needs its webhook_key (the decoded whsec_ secret: "
                "exporter.events.webhook.read_webhook_secret reads a secret file)"
            )
        for given in self.filters:
            if not isinstance(given, EventFilter):
                raise ConfigError(
                    f"EventsConfig: filters are EventFilter values, not {given!r}: "
                    "exporter.events.config.parse_event_filter('status=failed') makes one"
                )

    @property
    def sinks(self) -> tuple[str, ...]:
        return tuple(
            s for s, on in (("file", self.file is not None), ("webhook", self.webhook_url)) if on
        )


@dataclass(frozen=True)
class Backlog:
    """Events waiting, per sink, and the age mark of the oldest one."""

    pending: dict[str, int]  # sink -> events not yet delivered there
    oldest_us: int | None  # recorded_us of the oldest waiting event
    delivered: dict[str, int]  # sink -> events delivered over the dataset's life
    total: int  # events waiting for at least one sink (`_EITHER_SQL`)


def read_backlog(state: Any) -> Backlog:
    """The backlog of a `StateDB` (read-only too; a state from before the outbox has none)."""
    delivered = {
        s: int(v[0][0])
        if (v := state.query("SELECT value FROM meta WHERE key = ?", (f"events_delivered_{s}",)))
        else 0
        for s in SINKS
    }
    if not state.query(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'event_batches'"
    ):
        return Backlog({s: 0 for s in SINKS}, None, delivered, 0)
    *waiting, oldest, either = state.query(
        f"SELECT {', '.join(f'coalesce(sum({WAITING_SQL[s]}), 0)' for s in SINKS)}, "
        f"min(recorded_us), coalesce(sum({_EITHER_SQL}), 0) FROM event_batches"
    )[0]
    pending = {s: int(n) for s, n in zip(SINKS, waiting)}
    return Backlog(pending, oldest, delivered, int(either))


# Per batch, the events waiting for one sink or the other: the larger count (exact unless both
# sinks took different parts of one batch: a kill mid-append, and a webhook's lanes). The larger
# count over all batches said 35 waiting when the file's 35 of one run and the webhook's 19 of
# another waited: 54 did.
_EITHER_SQL = "max(coalesce(events - file_done, 0), coalesce(webhook_left, 0))"


# A batch every sink it was for took: deleted.
DONE_SQL = (
    "(file_done IS NULL OR file_done = events) AND (webhook_left IS NULL OR webhook_left = 0)"
)
# Per sink: what a discard sets to NULL (the batches are then not for it).
_CLEARED = {"file": "file_done = NULL", "webhook": "webhook_left = NULL, webhook_acked = NULL"}


def discard_backlog(state: Any, sink: str) -> tuple[int, int | None]:
    """Drop the events waiting for `sink` (one no longer given to `sync`: `opsaudit
    discard-events`), in one transaction of a `StateDB`; they are not counted delivered, the
    other sink's are kept. Returns how many were dropped and the oldest's recorded_us."""
    waiting = WAITING_SQL[sink]
    with state.transaction() as con:
        if not con.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'event_batches'"
        ).fetchone():
            return 0, None
        n, oldest = con.execute(
            f"SELECT coalesce(sum({waiting}), 0), min(recorded_us) FROM event_batches "
            f"WHERE {waiting} > 0"
        ).fetchone()
        con.execute(f"UPDATE event_batches SET {_CLEARED[sink]} WHERE {waiting} IS NOT NULL")
        con.execute(f"DELETE FROM event_batches WHERE {DONE_SQL}")
    return int(n), oldest
