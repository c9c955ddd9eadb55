"""Branches and compute endpoints of a simulated project, as the platform lists them.

The listings carry the fields of the platform's OpenAPI document (`Branch`, `Endpoint`): the
tracked ones (name, parent, default, protected, expiry; an endpoint's branch, type, autoscaling,
suspend timeout, disabled, pooler) and the live ones, whose counters and state move on every read
(`logical_size`, `cpu_used_sec`, `current_state`, `last_active`, ...): an exporter must not
version those. Computes are often unnamed (no `name` field), as on the platform.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field
from typing import Any

from exporter.simulator._timefmt import US, fmt_seconds

PEOPLE = ["Alice Moreau", "Bogdan Ilic", "Chen Wei", "Dana Okafor", "Emil Strand"]
# Who created a branch: a person, an organization API key, or an integration.
CREATORS: list[dict[str, Any]] = [
    *({"name": person, "image": ""} for person in PEOPLE),
    {"name": "ci-deploy (API key)"},
    {"name": "Vercel"},
    {},  # some branches say nothing about their creator
]
_PREFIXES = ["preview/pr-", "dev/", "feature/", "hotfix/", "staging-"]
_WORDS = ["login", "billing", "search", "export", "onboarding", "reports", "cache", "audit"]


@dataclass
class BranchMeta:
    """One branch's listed fields (tracked ones and its creation)."""

    id: str
    name: str
    created_us: int
    parent_id: str | None = None
    default: bool = False
    protected: bool = False
    expires_us: int | None = None
    created_by: dict[str, Any] = field(default_factory=dict)
    updated_us: int = 0
    deleted: bool = False


@dataclass
class EndpointMeta:
    """One compute endpoint's listed fields (`name` None: an unnamed compute)."""

    id: str
    branch_id: str
    created_us: int
    name: str | None = None
    type: str = "read_write"
    min_cu: float = 0.25
    max_cu: float = 1.0
    suspend_timeout_seconds: int = 0
    disabled: bool = False
    pooler_enabled: bool = False
    updated_us: int = 0
    deleted: bool = False


def branch_name(rng: random.Random, first: bool) -> str:
    if first:
        return "main" if rng.random() < 0.8 else "production"
    prefix = rng.choice(_PREFIXES)
    if prefix == "preview/pr-":
        return f"{prefix}{rng.randrange(1, 2000)}"
    if prefix == "dev/":
        return f"{prefix}{rng.choice(PEOPLE).split()[0].lower()}"
    return f"{prefix}{rng.choice(_WORDS)}-{rng.randrange(1, 100)}"


def new_branch(
    rng: random.Random, branch_id: str, created_us: int, parent_id: str | None
) -> BranchMeta:
    first = parent_id is None
    return BranchMeta(
        id=branch_id,
        name=branch_name(rng, first),
        created_us=created_us,
        parent_id=parent_id,
        default=first,
        protected=first and rng.random() < 0.3,
        expires_us=None if first or rng.random() < 0.7 else created_us + 7 * 86400 * US,
        created_by=dict(rng.choice(CREATORS)),
        updated_us=created_us,
    )


def new_endpoint(
    rng: random.Random, endpoint_id: str, branch_id: str, created_us: int
) -> EndpointMeta:
    return EndpointMeta(
        id=endpoint_id,
        branch_id=branch_id,
        created_us=created_us,
        # Most computes have no name: the listing then carries no `name` field.
        name=None if rng.random() < 0.6 else rng.choice(["primary", "analytics", "reporting"]),
        type="read_write" if rng.random() < 0.85 else "read_only",
        min_cu=0.25,
        max_cu=rng.choice([0.25, 1.0, 2.0, 4.0]),
        suspend_timeout_seconds=rng.choice([0, 300, 3600]),
        pooler_enabled=rng.random() < 0.3,
        updated_us=created_us,
    )


def render_branch(project_id: str, b: BranchMeta, reads: int, clock_us: int) -> dict[str, Any]:
    """The `Branch` object; counters and state change with every read (`reads`)."""
    out: dict[str, Any] = {
        "id": b.id,
        "project_id": project_id,
        "name": b.name,
        "current_state": "ready" if reads % 3 else "init",
        "state_changed_at": fmt_seconds(clock_us - (reads % 7) * US),
        "logical_size": 30_000_000 + 8192 * reads,
        "creation_source": "console",
        "primary": b.default,
        "default": b.default,
        "protected": b.protected,
        "cpu_used_sec": 100 + reads,
        "compute_time_seconds": 100 + reads,
        "active_time_seconds": 400 + 4 * reads,
        "written_data_bytes": 1_000_000 + 512 * reads,
        "data_transfer_bytes": 2_000 * reads,
        "created_at": fmt_seconds(b.created_us),
        "updated_at": fmt_seconds(max(b.updated_us, clock_us - 60 * US)),
        "init_source": "parent-data",
    }
    if b.parent_id is not None:
        out["parent_id"] = b.parent_id
        out["parent_lsn"] = f"0/{0x1F0000 + b.created_us % 65536:X}"
        out["parent_timestamp"] = fmt_seconds(b.created_us)
    if b.expires_us is not None:
        out["expires_at"] = fmt_seconds(b.expires_us)
    if b.created_by:
        out["created_by"] = dict(b.created_by)
    return out


def render_endpoint(
    project_id: str, region: str, e: EndpointMeta, reads: int, clock_us: int
) -> dict[str, Any]:
    """The `Endpoint` object; `current_state`, `last_active` and counters move between reads."""
    host = f"{e.id}.{region.split('-', 1)[1]}.{region.split('-', 1)[0]}.neon.tech"
    out: dict[str, Any] = {
        "host": host,
        "id": e.id,
        "project_id": project_id,
        "branch_id": e.branch_id,
        "autoscaling_limit_min_cu": e.min_cu,
        "autoscaling_limit_max_cu": e.max_cu,
        "region_id": region,
        "type": e.type,
        "current_state": "active" if reads % 2 else "idle",
        "settings": {},
        "pooler_enabled": e.pooler_enabled,
        "pooler_mode": "transaction",
        "disabled": e.disabled,
        "passwordless_access": True,
        "last_active": fmt_seconds(clock_us - (reads % 5) * US),
        "creation_source": "console",
        "created_at": fmt_seconds(e.created_us),
        "updated_at": fmt_seconds(max(e.updated_us, clock_us - (reads % 11) * US)),
        "proxy_host": host.split(".", 1)[1],
        "suspend_timeout_seconds": e.suspend_timeout_seconds,
        "provisioner": "k8s-neonvm",
        "compute_release_version": str(8000 + reads),
    }
    if e.name is not None:
        out["name"] = e.name
    return out


def encode_cursor(last_id: str) -> str:
    """An opaque `pagination.next`: clients send it back as `cursor` and never parse it."""
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    padded = cursor + "=" * (-len(cursor) % 4)
    return base64.urlsafe_b64decode(padded.encode()).decode()
