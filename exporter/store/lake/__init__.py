"""Object storage for opsaudit (issue 11): Delta Lake tables with the state stored beside them.

Building blocks for the storage seam; the sync is wired to them separately. Needs the `store.lake`
extra (`pip install 'opsaudit[lake]'`: deltalake, obstore). Importing this package is cheap:
pyarrow loads with the table names, deltalake and obstore on first use.

    loc = parse_location("s3://bucket/audit", ["AWS_REGION=eu-west-1"])
    ds = LakeDataset.open(loc, create=True)           # marker, probe: bucket/credentials/endpoint
    lease = ds.lease(); lease.acquire(wait=False); lease.start_heartbeat()
    n = ds.restore_state(Path("/tmp/state.sqlite"), lease=lease) or 0  # last committed state
    ...                                               # sync one batch, update the local state
    ds.commit(versions_table, Path("/tmp/state.sqlite"), n + 1, run_id=run, lease=lease)
    ds.replace_table("projects", projects_table)
    ds.snapshot("operation_versions")                 # pyarrow dataset for DuckDB / Arrow readers
    ds.compact(); ds.vacuum()
    lease.release()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exporter.store.lake.location import Location, parse_location, parse_storage_options, redact

# The other modules' names, each imported on first use: parsing --data-dir (`location`, every
# reader's start-up: `opsaudit query`) loads neither the lease nor the object-store code, and
# pyarrow loads with the table module only. Type checkers read the names from the modules.
_LEASE_NAMES = ("DEFAULT_TTL", "Lease", "LeaseInfo", "LeaseLostError")
_OBJECTS_NAMES = (
    "LakeAccessError",
    "LakeUnreachableError",
    "LocalObjects",
    "Objects",
    "PreconditionFailed",
    "RemoteObjects",
    "objects_for",
)
_TABLE_NAMES = (
    "DEFAULT_VACUUM_RETENTION",
    "MIN_VACUUM_RETENTION",
    "PROJECTS",
    "SYNC_RUNS",
    "TABLES",
    "VERSIONS",
    "CommitResult",
    "DamagedTableError",
    "LakeDataset",
    "open_dataset",
    "state_bytes",
    "with_created_month",
)
if TYPE_CHECKING:
    from exporter.store.lake.lease import *  # noqa: F403
    from exporter.store.lake.objects import *  # noqa: F403
    from exporter.store.lake.tables import *  # noqa: F403


def __getattr__(name: str) -> Any:
    if name in _LEASE_NAMES:
        from exporter.store.lake import lease

        return getattr(lease, name)
    if name in _OBJECTS_NAMES:
        from exporter.store.lake import objects

        return getattr(objects, name)
    if name in _TABLE_NAMES:
        from exporter.store.lake import tables as _tables

        return getattr(_tables, name)
    raise AttributeError(f"module 'exporter.store.lake' has no attribute {name!r}")


__all__ = [
    "Location",
    "parse_location",
    "parse_storage_options",
    "redact",
    *_LEASE_NAMES,
    *_OBJECTS_NAMES,
    *_TABLE_NAMES,
]
