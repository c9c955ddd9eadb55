"""An operation as the sync reads it from a page: `Operation`, decoded in C by the API client
(msgspec), read by the walk and turned into columns by `engine.records` (issue 24).

A leaf of core (msgspec only): the client, the walk, the records and the model name it without
importing one another.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Operation(msgspec.Struct, gc=False):
    """The fields of an operation that the walk and the typed columns read, decoded in C: one
    small object per operation, no dict (client CPU, issue 24). Every field is `Any` and may be
    missing: a value of an unexpected type (a number where text was) must not fail the page (the
    typed columns keep its text or NULL, `engine.records`); unknown fields are skipped here and kept
    in `raw`. No reference cycles (JSON values), hence no GC tracking."""

    id: Any = None
    project_id: Any = None
    branch_id: Any = None
    endpoint_id: Any = None
    action: Any = None
    status: Any = None
    error: Any = None
    failures_count: Any = None
    total_duration_ms: Any = None
    created_at: Any = None
    updated_at: Any = None
    retry_at: Any = None


def operations_from(objects: list[Any]) -> list[Operation]:
    """Operations we only have as decoded JSON (a single-operation GET, tests)."""
    return msgspec.convert(objects, list[Operation])


__all__ = ["Operation", "operations_from"]
