"""Write a large synthetic dataset straight into opsaudit's Parquet layout, for the report benchmark.

    python bench/gen_dataset.py /tmp/opsaudit-10m --operations 10000000

One file per day under `operation_versions/created_month=YYYY-MM/`, the columns and types of
DESIGN.md (the sync engine's VERSIONS_SCHEMA), plus `projects/projects.parquet` and an empty
`sync_runs/sync_runs.parquet`. Vectorised numpy + pyarrow, one day at a time, so memory stays
flat: 10M operations take about a minute. Then, as a synced dataset has, `state.sqlite` listing
the files as committed and the superseded, summary and flagged records (written by the migration
of a dataset from before them, `Dataset.recover`: readers use them as after a sync), the
summary's total over all months and `opsaudit.duckdb`.
About 2 % of operations have 2 or 3 versions (running -> [failed ->] final state), the action
mix is a compute-heavy account's, and a few actions and statuses are unknown values.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from exporter.analytics.views import write_views_database
from exporter.core.names import EXPORTED_META
from exporter.store.local.dataset import (
    PROJECTS_SCHEMA,
    SYNC_RUNS_SCHEMA,
    VERSIONS_SCHEMA,
    Dataset,
    StagedFile,
)
from exporter.store.state import StateDB

# (action, weight, typical duration in ms): compute start/suspend dominate a real account.
ACTIONS = [
    ("start_compute", 30.0, 900),
    ("suspend_compute", 28.0, 300),
    ("check_availability", 15.0, 1500),
    ("apply_config", 12.0, 400),
    ("create_branch", 4.0, 150),
    ("create_timeline", 2.0, 2000),
    ("apply_storage_config", 2.0, 1200),
    ("delete_timeline", 1.5, 800),
    ("start_reserved_compute", 1.0, 1100),
    ("replace_safekeeper", 0.8, 9000),
    ("tenant_migrate", 0.7, 30000),
    ("switch_pageserver", 0.5, 5000),
    ("disable_maintenance", 0.5, 200),
    ("import_data", 0.3, 60000),
    ("rotate_credentials_v2", 0.1, 700),  # unknown to every published enum
    ("lfc_autoresize", 0.1, 250),  # unknown
]
# Final statuses: a few still open, a few unknown values.
STATUSES = [
    ("finished", 95.0),
    ("cancelled", 1.2),
    ("skipped", 1.5),
    ("failed", 0.6),
    ("error", 0.3),
    ("running", 0.5),
    ("scheduling", 0.4),
    ("cancelling", 0.1),
    ("waiting_for_quorum", 0.05),  # unknown
]
ERRORS = [
    "compute unavailable: pod not ready after 60s",
    "pageserver request timed out after 30s",
    "failed to apply config: connection reset by peer",
    "safekeeper quorum not reached",
    "could not start compute: no capacity in region",
]
MULTI_VERSION_SHARE = 0.02


def _hex_ids(rng: np.random.Generator, n: int) -> pa.Array:
    """n random UUID-formatted strings, built as one byte buffer (no Python loop)."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = digits[raw >> 4]
    hexed[:, 1::2] = digits[raw & 15]
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    out[:, 0:8], out[:, 9:13], out[:, 14:18] = hexed[:, 0:8], hexed[:, 8:12], hexed[:, 12:16]
    out[:, 19:23], out[:, 24:36] = hexed[:, 16:20], hexed[:, 20:32]
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def _names(prefix: str, n: int) -> pa.Array:
    return pa.array([f"{prefix}-{i:07d}" for i in range(n)])


def _pick(rng: np.random.Generator, weights: list[float], n: int) -> np.ndarray:
    p = np.asarray(weights, dtype=float)
    return rng.choice(len(p), size=n, p=p / p.sum())


def _ts(seconds: np.ndarray) -> pa.Array:
    return pa.array(seconds.astype("int64") * 1_000_000, type=pa.int64()).cast(
        VERSIONS_SCHEMA.field("created_at").type
    )


def _day_table(
    rng: np.random.Generator,
    day: dt.date,
    n: int,
    projects: pa.Array,
    endpoints: pa.Array,
    branches: int = 1,
) -> pa.Table:
    start = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp())
    created = start + np.sort(rng.integers(0, 86_400, size=n))
    action_idx = _pick(rng, [a[1] for a in ACTIONS], n)
    status_idx = _pick(rng, [s[1] for s in STATUSES], n)
    typical = np.asarray([a[2] for a in ACTIONS], dtype=float)[action_idx]
    duration = np.maximum(1, rng.lognormal(np.log(typical), 0.6)).astype("int64")
    failures = np.where(rng.random(n) < 0.03, rng.integers(1, 4, size=n), 0)
    statuses = np.asarray([s[0] for s in STATUSES], dtype=object)[status_idx]
    failures = np.where(np.isin(statuses, ["failed", "error"]), np.maximum(failures, 1), failures)
    queue = rng.integers(0, 3, size=n) + failures * rng.integers(5, 60, size=n)
    updated = created + duration // 1000 + queue
    project_idx = rng.integers(0, len(projects), size=n)
    endpoint_idx = project_idx * 2 + rng.integers(0, 2, size=n)  # two endpoints per project
    is_compute = np.isin(action_idx, [0, 1, 3, 8])
    has_error = (failures > 0) & (rng.random(n) < 0.8)
    error_idx = rng.integers(0, len(ERRORS), size=n)

    ids = _hex_ids(rng, n)
    action = pa.array([a[0] for a in ACTIONS]).take(pa.array(action_idx))
    status = pa.array(statuses.tolist(), type=pa.string())
    project = projects.take(pa.array(project_idx))
    endpoint = pc.if_else(
        pa.array(is_compute), endpoints.take(pa.array(endpoint_idx)), pa.nulls(n, pa.string())
    )
    branch = pc.binary_join_element_wise("br-", project, "")
    if branches > 1:  # br-<project>-<k>, k < branches (the names tables list them)
        k = pc.cast(pa.array(rng.integers(0, branches, size=n)), pa.string())
        branch = pc.binary_join_element_wise(branch, k, "-")
    error = pc.if_else(
        pa.array(has_error), pa.array(ERRORS).take(pa.array(error_idx)), pa.nulls(n, pa.string())
    )
    created_at, updated_at = _ts(created), _ts(updated)
    total = pa.array(np.where(np.isin(statuses, ["scheduling"]), 0, duration))
    raw = pc.binary_join_element_wise(
        '{"id":"',
        ids,
        '","project_id":"',
        project,
        '","branch_id":"',
        branch,
        '","action":"',
        action,
        '","status":"',
        status,
        '","failures_count":',
        pc.cast(pa.array(failures), pa.string()),
        ',"created_at":"',
        pc.strftime(created_at, "%Y-%m-%dT%H:%M:%SZ"),
        '","updated_at":"',
        pc.strftime(updated_at, "%Y-%m-%dT%H:%M:%SZ"),
        '","total_duration_ms":',
        pc.cast(total, pa.string()),
        "}",
        "",
    )
    final = {
        "id": ids,
        "project_id": project,
        "branch_id": branch,
        "endpoint_id": endpoint,
        "action": action,
        "status": status,
        "failures_count": pa.array(failures, type=pa.int64()),
        "error": error,
        "retry_at": pa.nulls(n, VERSIONS_SCHEMA.field("retry_at").type),
        "created_at": created_at,
        "updated_at": updated_at,
        "total_duration_ms": total,
        "raw": raw,
        "version": pa.array(np.ones(n, dtype=np.int32)),
        "observed_at": _ts(updated + 30),
        "run_id": pa.array(np.full(n, f"bench-{day.isoformat()}", dtype=object), type=pa.string()),
        "created_date": pa.array([day] * n, type=pa.date32()),
    }
    table = pa.table(final, schema=VERSIONS_SCHEMA)
    # Earlier states of ~2 % of the operations: the final state becomes version 2 or 3.
    multi = np.flatnonzero(rng.random(n) < MULTI_VERSION_SHARE)
    extra = rng.integers(1, 3, size=len(multi))  # 1 or 2 earlier versions
    versions = np.ones(n, dtype=np.int32)
    versions[multi] = extra + 1
    table = table.set_column(table.schema.get_field_index("version"), "version", pa.array(versions))
    parts = [table]
    for k in (1, 2):
        rows = multi[extra >= k]
        if len(rows) == 0:
            continue
        earlier = table.take(pa.array(rows))
        earlier = earlier.set_column(
            earlier.schema.get_field_index("status"),
            "status",
            pa.array(np.full(len(rows), "running" if k == 1 else "failed", dtype=object)),
        )
        earlier = earlier.set_column(
            earlier.schema.get_field_index("version"),
            "version",
            pa.array(np.full(len(rows), k, dtype=np.int32)),
        )
        parts.append(earlier)
    return pa.concat_tables(parts)


def _write_names(out: Path, project_ids: pa.Array, branches: int, now: dt.datetime) -> None:
    """The names tables a sync writes: with `branches` > 1, every branch of every project listed
    (`main`, `preview/pr-<k>`), 1 in 20 deleted; the other tables empty."""
    from exporter.core.names import TABLES, schema

    for table in TABLES:
        (out / table.name).mkdir(parents=True, exist_ok=True)
        rows: list[dict[str, object]] = []
        if branches > 1 and table.name in ("branches", "branch_versions"):
            for i, project in enumerate(project_ids.to_pylist()):
                for k in range(branches):
                    deleted = now if (i * branches + k) % 20 == 19 else None
                    rows.append(
                        {"id": f"br-{project}-{k}", "project_id": project, "version": 1}
                        | {"name": "main" if k == 0 else f"preview/pr-{k}", "default": k == 0}
                        | {"protected": False, "created_at": now, "first_seen_at": now}
                        | {"last_seen_at": now, "deleted_at": deleted, "valid_from": now}
                    )
        arrow_schema = schema(table)
        rows = [{f.name: r.get(f.name) for f in arrow_schema} for r in rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema), out / table.file)


def generate(
    out: Path,
    operations: int,
    projects: int,
    days: int,
    end: dt.date,
    seed: int,
    branches: int = 1,
) -> int:
    """Write the dataset under `out`; returns the number of version rows written."""
    rng = np.random.default_rng(seed)
    project_ids = _names("bench-project", projects)
    endpoints = _names("ep-bench", projects * 2)
    per_day = np.full(days, operations // days)
    per_day[: operations % days] += 1
    rows = 0
    written: list[StagedFile] = []
    for offset, n in enumerate(per_day):
        day = end - dt.timedelta(days=days - 1 - offset)
        table = _day_table(rng, day, int(n), project_ids, endpoints, branches)
        folder = out / "operation_versions" / f"created_month={day.isoformat()[:7]}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-bench-{day.day:02d}.parquet"
        pq.write_table(table, path, compression="zstd")
        rows += table.num_rows
        relative = path.relative_to(out).as_posix()
        written.append(
            StagedFile(relative, relative, folder.name, table.num_rows, path.stat().st_size)
        )
    now = pa.scalar(dt.datetime.now(dt.timezone.utc), type=VERSIONS_SCHEMA.field("created_at").type)
    columns = {f.name: pa.nulls(projects, f.type) for f in PROJECTS_SCHEMA}
    columns["id"] = project_ids
    columns["name"] = project_ids
    columns["first_seen_at"] = pa.array([now.as_py()] * projects, type=now.type)
    columns["open_operations"] = pa.array(np.zeros(projects, dtype=np.int64))
    (out / "projects").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=PROJECTS_SCHEMA), out / "projects" / "projects.parquet")
    # As after a sync: the runs table exists (with no file, readers stand in an empty relation
    # whose schema costs a pyarrow import, which a synced dataset never pays).
    (out / "sync_runs").mkdir(parents=True, exist_ok=True)
    pq.write_table(SYNC_RUNS_SCHEMA.empty_table(), out / "sync_runs" / "sync_runs.parquet")
    _write_names(out, project_ids, branches, now.as_py())
    # The state a sync would have left: the files committed (a pending file is published by
    # recovery), then the superseded record, as for a dataset written before it.
    state = StateDB(out / "state.sqlite")
    try:
        with state.transaction() as con:
            state.register_pending(con, written, run_id="bench")
        # The names files above are the export of the state's names, as a sync leaves them:
        # without this mark readers take the (empty) names from the state instead, through
        # pyarrow and pandas (~0.45 s of every report), and never read the files' branches.
        state.set_meta(EXPORTED_META, state.names_generation())
    finally:
        state.close()
    dataset = Dataset(out)
    try:
        dataset.recover()
    finally:
        dataset.close()
    # What the end of a sync writes (the views child): the summary's total over every month
    # and `opsaudit.duckdb`, which a report opens instead of creating every view.
    write_views_database(out)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="data directory to create (must not exist)")
    parser.add_argument("--operations", type=int, default=10_000_000)
    parser.add_argument("--projects", type=int, default=5_000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument(
        "--end", type=dt.date.fromisoformat, default=dt.datetime.now(dt.timezone.utc).date()
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--branches",
        type=int,
        default=1,
        help="branches per project; above 1 they are listed in the names tables (issue 21)",
    )
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} exists and is not empty")
    started = time.monotonic()
    rows = generate(
        args.out, args.operations, args.projects, args.days, args.end, args.seed, args.branches
    )
    print(
        f"{args.operations:,} operations ({rows:,} versions) in {args.out} "
        f"in {time.monotonic() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
