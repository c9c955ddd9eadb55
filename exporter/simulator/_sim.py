"""`Simulator`: the world plus its HTTP server in a background thread, and the test API."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from exporter.simulator._config import Faults, RateLimits, SimConfig
from exporter.simulator._server import SimServer
from exporter.simulator._world import Key, World


class Simulator:
    """A simulated platform account served on loopback; every method is thread-safe."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.world = World(self.config)
        self._server: SimServer | None = None
        self._thread: threading.Thread | None = None
        self._live_stop: threading.Event | None = None
        self._live_thread: threading.Thread | None = None
        self._faults = Faults()
        self._rate_limits = RateLimits()
        self._scripted: list[list[Any]] = []  # shared with the server: see fail_requests

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Simulator:
        if self._server is not None:
            return self
        server = SimServer((self.config.host, self.config.port), self.world)
        server.set_faults(self._faults)
        server.rate_limits = self._rate_limits
        server.scripted = self._scripted
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stop_live()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the simulator is not started: call start()")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """Where /_sim/* lives: the base URL without /api/v2."""
        return f"http://{self.config.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/api/v2"

    # -- keys -----------------------------------------------------------------------------------

    @property
    def personal_key(self) -> str:
        return self.world.personal_key

    def org_key(self, org_id: str) -> str:
        with self.world.lock:
            if org_id not in self.org_ids:
                raise KeyError(f"unknown organization {org_id!r}")
            return self.world.add_key("org", org_id)

    def project_key(self, project_id: str) -> str:
        with self.world.lock:
            if project_id not in self.world.by_id:
                raise KeyError(f"unknown project {project_id!r}")
            return self.world.add_key("project", project_id)

    def revoke_key(self, key: str) -> None:
        """Later requests with the key get 401 at once (platform-api.md 3.2)."""
        with self.world.lock:
            self.world.revoked.add(key)

    def key_info(self, key: str) -> Key | None:
        with self.world.lock:
            return self.world.keys.get(key)

    # -- reading the world ------------------------------------------------------------------------

    @property
    def org_ids(self) -> list[str]:
        return [o["id"] for o in self.world.orgs]

    @property
    def clock(self) -> str:
        """The virtual clock as a cursor-style RFC 3339 string."""
        from exporter.simulator._timefmt import fmt_cursor

        with self.world.lock:
            return fmt_cursor(self.world.clock_us)

    def project_ids(self, org_id: str | None = None) -> list[str]:
        """Live projects in listing order; with no org: each org's listing, then shared ones."""
        w = self.world
        with w.lock:
            if org_id is not None:
                if org_id == w.foreign_org:
                    return list(w.listing(None, shared=True))
                return list(w.listing(org_id))
            out: list[str] = []
            for org in self.org_ids:
                out += w.listing(org)
            return out + w.listing(None, shared=True)

    def ground_truth(self, project_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Op id -> the operation exactly as the API renders it now, for live projects."""
        w = self.world
        with w.lock:
            ids = self.project_ids() if project_ids is None else project_ids
            out: dict[str, dict[str, Any]] = {}
            for pid in ids:
                p = w.live_project(pid)
                if p is None:
                    continue
                for i in range(len(p.ids)):
                    out[p.ids[i]] = w.op_dict(p, i)
            return out

    def operation_count(self, project_id: str | None = None) -> int:
        """How many operations a live project (or every live project) has; cheap."""
        w = self.world
        with w.lock:
            ids = self.project_ids() if project_id is None else [project_id]
            return sum(len(p.ids) for pid in ids if (p := w.live_project(pid)) is not None)

    # -- changing the world -----------------------------------------------------------------------

    def add_operations(
        self,
        project_id: str,
        n: int,
        *,
        action: str | None = None,
        status: str | None = None,
        same_second: bool = True,
    ) -> list[str]:
        """n new operations at the clock (status "finished" unless given); returns their ids.

        Operations given a status are not moved by live progression: the caller drives them.
        """
        with self.world.lock:
            return self.world.add_operations(project_id, n, action, status, same_second)

    def update_operation(self, op_id: str, **fields: Any) -> None:
        """Set fields (None removes one; unknown names become extra fields); updated_at = clock
        unless given. The operation leaves live progression."""
        with self.world.lock:
            self.world.update_operation(op_id, fields)

    def advance(self, seconds: float) -> None:
        """Move the virtual clock: new operations arrive, open ones progress."""
        with self.world.lock:
            self.world.advance(seconds)

    def add_project(
        self, org_id: str | None = None, name: str | None = None, *, shared: bool = False
    ) -> str:
        """A new project (two open operations at the clock); `shared`: a project of another
        user's organization shared with the default user (listed by GET /projects/shared)."""
        with self.world.lock:
            return self.world.add_project(org_id, name, shared).id

    def set_quiet(self, project_id: str, quiet: bool = True) -> None:
        """No live arrivals in this project from now on (operations added by hand still
        are): a project left alone, which `--skip-idle` may leave idle."""
        with self.world.lock:
            p = self.world.live_project(project_id)
            if p is None:
                raise KeyError(f"unknown project {project_id!r}")
            p.quiet = quiet

    def fractional_created_at(self, op_id: str, offset: str = "+02:00") -> None:
        """Render the op's created_at with its microseconds and a numeric offset (the same
        instant), as the real API once did among whole-second `Z` neighbours
        (`...08.841+02:00`); the order of the listing does not change."""
        sign = -1 if offset.startswith("-") else 1
        hh, _, mm = offset.lstrip("+-").partition(":")
        with self.world.lock:
            self.world.set_created_offset(op_id, sign * (int(hh) * 60 + int(mm or 0)))

    def add_branch(self, project_id: str, name: str | None = None) -> tuple[str, str, list[str]]:
        """A new branch (named `name`, else a generated name) with a compute, at the clock, and
        its create_branch + start_compute operations; returns (branch id, endpoint id, op ids)."""
        with self.world.lock:
            return self.world.add_branch(project_id, name)

    def change_branch(self, branch_id: str, **fields: Any) -> None:
        """Rename a branch or change its other tracked fields (protected, default, expires_at)."""
        with self.world.lock:
            self.world.change_branch(branch_id, fields)

    def change_endpoint(self, endpoint_id: str, **fields: Any) -> None:
        """Rename a compute (name=None: unnamed) or change its other tracked fields."""
        with self.world.lock:
            self.world.change_endpoint(endpoint_id, fields)

    def delete_branch(self, branch_id: str) -> None:
        """The branch and its computes leave the listings (their operations stay)."""
        with self.world.lock:
            self.world.delete_branch(branch_id)

    def branches(self, project_id: str) -> list[dict[str, Any]]:
        """The project's branches as the API lists them now (one more read: counters move)."""
        with self.world.lock:
            p = self.world.live_project(project_id)
            return [] if p is None else self.world.branches(p)

    def endpoints(self, project_id: str) -> list[dict[str, Any]]:
        """The project's compute endpoints as the API lists them now."""
        with self.world.lock:
            p = self.world.live_project(project_id)
            return [] if p is None else self.world.endpoints(p)

    def delete_project(self, project_id: str) -> None:
        with self.world.lock:
            self.world.delete_project(project_id)

    def start_live(self, tick_seconds: float = 0.05, sim_seconds_per_tick: float = 30.0) -> None:
        """A background ticker calling advance(sim_seconds_per_tick) every tick_seconds."""
        self.stop_live()
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(tick_seconds):
                self.advance(sim_seconds_per_tick)

        self._live_stop = stop
        self._live_thread = threading.Thread(target=tick, daemon=True, name="sim-live")
        self._live_thread.start()

    def stop_live(self) -> None:
        if self._live_stop is not None and self._live_thread is not None:
            self._live_stop.set()
            self._live_thread.join()
        self._live_stop = self._live_thread = None

    # -- faults, limits, counters -------------------------------------------------------------------

    @property
    def faults(self) -> Faults:
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self._faults = faults
        if self._server is not None:
            self._server.set_faults(faults)

    @property
    def rate_limits(self) -> RateLimits:
        return self._rate_limits

    @rate_limits.setter
    def rate_limits(self, limits: RateLimits) -> None:
        self._rate_limits = limits
        if self._server is not None:
            self._server.rate_limits = limits
            self._server.limiter.reset()

    def fail_requests(
        self,
        path_suffix: str,
        status: int = 503,
        *,
        times: int | None = None,
        after: int = 0,
        retry_after: int | None = None,
    ) -> None:
        """Requests whose path (without the query) ends with `path_suffix` answer `status` with
        a JSON error body (and a `Retry-After: retry_after` header unless None): after the first
        `after` such requests pass, the next `times` (None: every one until clear_failures).
        E.g. "/projects/shared", f"/operations/{op_id}", f"/projects/{pid}/operations" (the
        listing, not the single-operation GETs); after a `?`, text the query must hold:
        f"/projects?org_id={org}" (one organization's listing)."""
        server = self._server
        lock = server.fault_lock if server is not None else threading.Lock()
        with lock:
            self._scripted.append([path_suffix, status, times, after, retry_after])

    def echo_auth_in_errors(self, on: bool = True) -> None:
        """Scripted failures quote the request's Authorization header in their message."""
        if self._server is not None:
            self._server.echo_auth = on

    def clear_failures(self) -> None:
        server = self._server
        lock = server.fault_lock if server is not None else threading.Lock()
        with lock:
            self._scripted.clear()

    def stats(self) -> dict[str, Any]:
        """The same JSON as GET /_sim/stats."""
        if self._server is None:
            return {}
        return self._server.stats.snapshot()

    def reset_stats(self) -> None:
        if self._server is not None:
            with self._server.stats.lock:
                self._server.stats.reset()
