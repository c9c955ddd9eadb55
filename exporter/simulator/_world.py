"""The simulated account: organizations, projects, keys and the clock, behind one lock."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from exporter.simulator._config import SimConfig
from exporter.simulator._generate import (
    ADJ,
    COMMON,
    OpFactory,
    api_key,
    generate_history,
    new_interners,
    slug,
    uuid4,
)
from exporter.simulator._live import arrivals, progress
from exporter.simulator._model import ABSENT, TERMINAL, ProjectData
from exporter.simulator._names import (
    BranchMeta,
    EndpointMeta,
    branch_name,
    render_branch,
    render_endpoint,
)
from exporter.simulator._timefmt import US, fmt_seconds, parse_seconds_us

REGIONS = ["aws-us-east-2", "aws-eu-central-1", "aws-us-west-2", "azure-eastus2"]
# Fields an update may set directly; anything else is an extra (unknown) field.
_KNOWN = {
    "status",
    "action",
    "failures_count",
    "error",
    "retry_at",
    "updated_at",
    "total_duration_ms",
    "branch_id",
    "endpoint_id",
}


@dataclass(frozen=True)
class Key:
    """An API key: kind is "personal", "org" or "project"; scope is the org or project id."""

    kind: str
    scope: str | None = None


class World:
    """Everything the API serves. Callers hold `lock` (server threads and tests both mutate)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.lock = threading.RLock()
        self.actions, self.statuses = new_interners()
        seed = config.seed
        self.names_rng = random.Random(f"{seed}/names")
        self.keys_rng = random.Random(f"{seed}/keys")
        self.live_rng = random.Random(f"{seed}/live")
        self.adds_rng = random.Random(f"{seed}/adds")
        self.renames_rng = random.Random(f"{seed}/renames")
        # Every read of a branches or endpoints listing moves their counters and live state.
        self.listing_reads = 0
        self.clock_us = parse_seconds_us(config.start)
        rate = config.live_ops_per_project_per_hour
        self.live_rate = config.ops_per_project_per_day / 24 if rate is None else rate
        self.user_id = uuid4(self.names_rng)
        self.orgs: list[dict[str, Any]] = []
        for n in range(config.orgs):
            created = fmt_seconds(self.clock_us - (400 + 37 * n) * 86400 * US)
            handle = slug(self.names_rng)
            self.orgs.append(
                {
                    "id": f"org-{handle}",
                    "name": f"{ADJ[n % len(ADJ)].title()} Org {n + 1}",
                    "handle": handle,
                    "plan": "scale" if n == 0 else "launch",
                    "created_at": created,
                    "updated_at": created,
                    "managed_by": "console",
                }
            )
        self.foreign_org = f"org-{slug(self.names_rng)}"  # owns the projects shared with the user
        self.projects: list[ProjectData] = []
        self.by_id: dict[str, ProjectData] = {}
        self.op_index: dict[str, int] = {}  # op id -> (project index << 32) | op index
        self.open_ops: dict[int, int] = {}  # same code -> next event time (us), live progression
        self._factories: dict[int, OpFactory] = {}
        self._listing: dict[str | None, list[str]] = {}  # cached sorted ids per org / "shared"
        days_us = int(config.days * 86400 * US)
        n_ops = config.ops_per_project_per_day * config.days
        for n in range(config.projects + config.shared_projects):
            # Without organizations (`--orgs 0`) every project is another's, shared with the user.
            shared = n >= config.projects or not self.orgs
            org = self.foreign_org if shared else self.orgs[n % len(self.orgs)]["id"]
            p = self._new_project(org, None, shared, self.clock_us - days_us - 86400 * US)
            emitted = generate_history(
                self.factory(p), self.clock_us - days_us, self.clock_us, n_ops
            )
            for em in emitted:
                self.open_ops[(p.index << 32) | em.index] = em.next_us or self.clock_us
            self._delete_some_branches(p)
        for p in self.projects:
            base = p.index << 32
            for i, op_id in enumerate(p.ids):
                self.op_index[op_id] = base | i
        self.keys: dict[str, Key] = {}
        self.revoked: set[str] = set()
        self.personal_key = self._new_key(Key("personal"))

    # -- construction helpers ---------------------------------------------------------------

    def _new_project(
        self, org_id: str, name: str | None, shared: bool, created_us: int
    ) -> ProjectData:
        rng = self.names_rng
        pid = slug(rng)
        while pid in self.by_id:
            pid = slug(rng)
        region = rng.choice(REGIONS)
        created = fmt_seconds(created_us)
        meta: dict[str, Any] = {
            "id": pid,
            "platform_id": region.split("-", 1)[0],
            "region_id": region,
            "name": name or f"{rng.choice(ADJ)}-{rng.randrange(1000, 10000)}",
            "provisioner": "k8s-neonvm",
            "default_endpoint_settings": {
                "autoscaling_limit_min_cu": 0.25,
                "autoscaling_limit_max_cu": rng.choice([0.25, 1, 2, 4]),
                "suspend_timeout_seconds": 0,
            },
            "settings": {
                "allowed_ips": {"ips": [], "protected_branches_only": False},
                "enable_logical_replication": False,
                "block_public_connections": False,
                "block_vpc_connections": False,
            },
            "pg_version": rng.choice([15, 16, 17, 17]),
            "proxy_host": f"{region.split('-', 1)[1]}.{region.split('-', 1)[0]}.neon.tech",
            "branch_logical_size_limit": 512,
            "branch_logical_size_limit_bytes": 536870912,
            "store_passwords": True,
            "active_time": rng.randrange(0, 10**6),
            "cpu_used_sec": rng.randrange(0, 10**6),
            "locked": False,
            "creation_source": "console",
            "created_at": created,
            "updated_at": created,
            "synthetic_storage_size": rng.randrange(0, 10**9),
            "quota_reset_at": "2025-02-01T00:00:00Z",
            "owner_id": uuid4(rng) if shared else self.user_id,
        }
        p = ProjectData(len(self.projects), pid, org_id, meta, shared)
        p.born_us = created_us
        self.projects.append(p)
        self.by_id[pid] = p
        self._listing.clear()
        return p

    def factory(self, p: ProjectData) -> OpFactory:
        f = self._factories.get(p.index)
        if f is None:
            rng = random.Random(f"{self.config.seed}/project/{p.index}")
            names = random.Random(f"{self.config.seed}/names/{p.index}")
            f = self._factories[p.index] = OpFactory(
                p, rng, self.actions, self.statuses, names_rng=names
            )
        return f

    def _new_key(self, key: Key) -> str:
        token = api_key(self.keys_rng)
        self.keys[token] = key
        return token

    # -- queries (call with the lock held) --------------------------------------------------

    def listing(self, org_id: str | None, shared: bool = False) -> list[str]:
        """Live project ids of an org (or the shared ones), in listing order: by id."""
        cache_key = "/shared" if shared else org_id
        ids = self._listing.get(cache_key)
        if ids is None:
            ids = sorted(
                p.id
                for p in self.projects
                if not p.deleted and (p.shared if shared else p.org_id == org_id and not p.shared)
            )
            self._listing[cache_key] = ids
        return ids

    def live_project(self, project_id: str) -> ProjectData | None:
        p = self.by_id.get(project_id)
        return None if p is None or p.deleted else p

    def branches(self, p: ProjectData) -> list[dict[str, Any]]:
        """The project's branches as listed now (by id); every call is one more read."""
        self.listing_reads += 1
        return [
            render_branch(p.id, b, self.listing_reads, self.clock_us)
            for b in sorted(p.branch_meta.values(), key=lambda b: b.id)
            if not b.deleted
        ]

    def endpoints(self, p: ProjectData) -> list[dict[str, Any]]:
        """The project's compute endpoints as listed now; every call is one more read."""
        self.listing_reads += 1
        region = str(p.meta["region_id"])
        return [
            render_endpoint(p.id, region, e, self.listing_reads, self.clock_us)
            for e in p.endpoint_meta.values()
            if not e.deleted
        ]

    def find_branch(self, branch_id: str) -> tuple[ProjectData, BranchMeta]:
        for p in self.projects:
            b = p.branch_meta.get(branch_id)
            if b is not None:
                return p, b
        raise KeyError(f"unknown branch {branch_id!r}")

    def find_endpoint(self, endpoint_id: str) -> tuple[ProjectData, EndpointMeta]:
        for p in self.projects:
            e = p.endpoint_meta.get(endpoint_id)
            if e is not None:
                return p, e
        raise KeyError(f"unknown endpoint {endpoint_id!r}")

    def find_op(self, op_id: str) -> tuple[ProjectData, int]:
        code = self.op_index.get(op_id)
        if code is None:
            raise KeyError(f"unknown operation {op_id!r}")
        return self.projects[code >> 32], code & 0xFFFFFFFF

    def op_dict(self, p: ProjectData, i: int) -> dict[str, Any]:
        return orjson.loads(p.render(i, self.actions, self.statuses))

    # -- mutations (call with the lock held) ------------------------------------------------

    def add_key(self, kind: str, scope: str | None) -> str:
        return self._new_key(Key(kind, scope))

    def add_project(
        self, org_id: str | None, name: str | None, shared: bool = False
    ) -> ProjectData:
        """A new project of an org, or (shared) of another user's org shared with the user."""
        if shared:
            if org_id is not None:
                raise ValueError("a shared project belongs to the foreign organization")
            org_id = self.foreign_org
        elif org_id is None:
            org_id = self.orgs[0]["id"] if self.orgs else self.foreign_org
        elif org_id not in {o["id"] for o in self.orgs}:
            raise KeyError(f"unknown organization {org_id!r}")
        p = self._new_project(org_id, name, shared, self.clock_us)
        f = self.factory(p)
        b, e = f.computes[0]
        # A new project starts with create_timeline and start_compute in the same second,
        # as recorded from the real API (fixtures: solitary-cell).
        for em in f.write(
            [("create_timeline", b, -1), ("start_compute", b, e)],
            self.clock_us,
            self.clock_us,
            True,
        ):
            code = (p.index << 32) | em.index
            self.op_index[p.ids[em.index]] = code
            self.open_ops[code] = em.next_us or self.clock_us
        return p

    def delete_project(self, project_id: str) -> None:
        p = self.live_project(project_id)
        if p is None:
            raise KeyError(f"unknown project {project_id!r}")
        p.deleted = True
        self._listing.clear()

    def add_operations(
        self,
        project_id: str,
        n: int,
        action: str | None,
        status: str | None,
        same_second: bool,
    ) -> list[str]:
        p = self.live_project(project_id)
        if p is None:
            raise KeyError(f"unknown project {project_id!r}")
        f = self.factory(p)
        rng = self.adds_rng
        out: list[str] = []
        # Default status "finished": a test that wants open ops says so. Ops added with a
        # non-terminal status are the caller's to move (live progression leaves them alone).
        st = status or "finished"
        groups = [n] if same_second else [1] * n
        t = self.clock_us
        for size in groups:
            specs = []
            for _ in range(size):
                act = action or rng.choice(COMMON[:4])
                b, e = rng.choice(f.computes)
                specs.append((act, b, -1 if act in ("create_branch", "create_timeline") else e))
            for em in f.write(specs, t, t, True, status=st):
                self.op_index[p.ids[em.index]] = (p.index << 32) | em.index
                out.append(p.ids[em.index])
            t = max(t, p.created[-1]) // US * US + US  # next group: the next whole second
        if not same_second and n:
            self.clock_us = max(self.clock_us, p.created[-1])
        return out

    def add_branch(self, project_id: str, name: str | None) -> tuple[str, str, list[str]]:
        """A new branch with a compute at the clock: its create_branch and start_compute
        operations (finished); returns (branch id, endpoint id, operation ids)."""
        p = self.live_project(project_id)
        if p is None:
            raise KeyError(f"unknown project {project_id!r}")
        f = self.factory(p)
        b, e = f.next_branch_compute(self.clock_us)
        branch_id, endpoint_id = p.branches[b], p.endpoints[e]
        if name is not None:
            p.branch_meta[branch_id].name = name
        ops = f.write(
            [("create_branch", b, -1), ("start_compute", b, e)],
            self.clock_us,
            self.clock_us,
            True,
            status="finished",
        )
        out = []
        for em in ops:
            self.op_index[p.ids[em.index]] = (p.index << 32) | em.index
            out.append(p.ids[em.index])
        self.clock_us = max(self.clock_us, p.created[-1])
        return branch_id, endpoint_id, out

    def change_branch(self, branch_id: str, fields: dict[str, Any]) -> None:
        """Set tracked fields of a branch (name, protected, expires_at as RFC 3339 or None)."""
        _p, b = self.find_branch(branch_id)
        for name, value in fields.items():
            if name == "expires_at":
                b.expires_us = None if value is None else parse_seconds_us(value)
            elif name in ("name", "protected", "default", "parent_id"):
                setattr(b, name, value)
            else:
                raise ValueError(f"{name} is not a branch field the simulator changes")
        b.updated_us = self.clock_us

    def change_endpoint(self, endpoint_id: str, fields: dict[str, Any]) -> None:
        """Set tracked fields of an endpoint (name: None makes it unnamed)."""
        _p, e = self.find_endpoint(endpoint_id)
        renames = {"autoscaling_limit_min_cu": "min_cu", "autoscaling_limit_max_cu": "max_cu"}
        for name, value in fields.items():
            attr = renames.get(name, name)
            if attr not in (
                "name",
                "branch_id",
                "type",
                "min_cu",
                "max_cu",
                "suspend_timeout_seconds",
                "disabled",
                "pooler_enabled",
            ):
                raise ValueError(f"{name} is not an endpoint field the simulator changes")
            setattr(e, attr, value)
        e.updated_us = self.clock_us

    def delete_branch(self, branch_id: str, *, quiet: bool = True) -> None:
        """The branch and its computes leave the listings; with `quiet`, no new operation
        names them."""
        p, b = self.find_branch(branch_id)
        if b.default:
            raise ValueError("the default branch cannot be deleted")
        b.deleted = True
        for e in p.endpoint_meta.values():
            if e.branch_id == branch_id:
                e.deleted = True
        if quiet:
            self.factory(p).drop_compute(p.branch_ix(branch_id))

    def _delete_some_branches(self, p: ProjectData) -> None:
        """History: about one branch in eight was deleted before the clock's start, so old
        operations name ids that no listing shows any more. Their computes stay in the
        operation mix (not quiet): a seed's operations are the bytes they were before branches
        were listed, and later operations naming an id no listing has exercise that case too."""
        rng = self.factory(p).names_rng
        for b in list(p.branch_meta.values()):
            if not b.default and rng.random() < 0.125:
                self.delete_branch(b.id, quiet=False)

    def _rename_some_branches(self, old_us: int, new_us: int) -> None:
        """Live: now and then a branch is renamed (about one per project in four days)."""
        rng = self.renames_rng
        chance = (new_us - old_us) / (4 * 86400 * US)
        for p in self.projects:
            if p.deleted or rng.random() >= chance:
                continue
            live = [b for b in p.branch_meta.values() if not b.deleted and not b.default]
            if live:
                b = rng.choice(live)
                b.name = branch_name(rng, False)
                b.updated_us = new_us

    def update_operation(self, op_id: str, fields: dict[str, Any]) -> None:
        p, i = self.find_op(op_id)
        for name in ("id", "project_id", "created_at"):
            if name in fields:
                raise ValueError(f"{name} cannot change")
        # The caller now drives this op: live progression must not overwrite its story.
        self.open_ops.pop((p.index << 32) | i, None)
        upd = fields.get("updated_at")
        p.updated[i] = self.clock_us if upd is None else parse_seconds_us(upd)
        for name, value in fields.items():
            if name == "status":
                p.status[i] = self.statuses.get(str(value))
            elif name == "action":
                p.action[i] = self.actions.get(str(value))
            elif name == "failures_count":
                p.failures[i] = ABSENT if value is None else int(value)
            elif name == "total_duration_ms":
                p.duration[i] = ABSENT if value is None else int(value)
            elif name == "error":
                _set_or_drop(p.error, i, value)
            elif name == "retry_at":
                _set_or_drop(p.retry_at, i, None if value is None else parse_seconds_us(value))
            elif name == "branch_id":
                p.branch[i] = p.branch_ix(value)
            elif name == "endpoint_id":
                p.endpoint[i] = p.endpoint_ix(value)
            elif name not in _KNOWN:
                extra = p.extra.setdefault(i, {})
                if value is None:
                    extra.pop(name, None)
                else:
                    extra[name] = value
        p.rendered[i] = None

    def set_created_offset(self, op_id: str, offset_minutes: int | None) -> None:
        """Render the op's created_at with its fraction and a numeric offset (None: as usual)."""
        p, i = self.find_op(op_id)
        if offset_minutes is None:
            p.created_offset.pop(i, None)
        else:
            p.created_offset[i] = offset_minutes
        p.rendered[i] = None

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        old = self.clock_us
        new = old + round(seconds * US)
        arrivals(self, old, new)
        self._rename_some_branches(old, new)
        self._index_new_ops()
        progress(self, new)
        self.clock_us = max(self.clock_us, new)

    def _index_new_ops(self) -> None:
        # Arrivals append to projects; index ids of ops not yet in op_index (checked from the end).
        for p in self.projects:
            base = p.index << 32
            i = len(p.ids) - 1
            while i >= 0 and p.ids[i] not in self.op_index:
                self.op_index[p.ids[i]] = base | i
                i -= 1

    def open_count(self) -> int:
        n = 0
        sv = self.statuses.values
        for p in self.projects:
            if not p.deleted:
                n += sum(1 for s in p.status if sv[s] not in TERMINAL)
        return n


def _set_or_drop(table: dict[int, Any], i: int, value: Any) -> None:
    if value is None:
        table.pop(i, None)
    else:
        table[i] = value
