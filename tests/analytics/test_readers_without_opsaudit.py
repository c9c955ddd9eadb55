"""DuckDB, Polars, pandas and Spark read the local dataset as README's "Reading the Parquet
without opsaudit" tells their users to (each block run as it is) and agree exactly with
`opsaudit query`.

The dataset comes from the built-in simulator over loopback: a backfill of three projects over
two months, then syncs of eight hours and three quarter-hours of live traffic (new operations;
open ones move on, so many operations have several versions) while `opsaudit.duckdb` is held
open, as a DuckDB shell would hold it. The compaction inputs then stay on disk after those runs
(the views database still names them), so a directory read sees more files than the committed
ones: the case the README's deduplication on (id, version) is for. The last test syncs a
copy once more with nothing held open and checks that only the committed files are left.

One SparkSession for the module (local, UI off, driver bound to 127.0.0.1, times in UTC).
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from exporter.api.client import RetryPolicy
from exporter.cli import cli
from exporter.engine.sync import RunSummary, SyncConfig, sync
from exporter.engine.walk import WalkLimits
from exporter.simulator import SimConfig, Simulator
from exporter.store.local.reader import committed_files

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
README_ROOT = "/var/lib/opsaudit"  # the data directory in README's examples
_SECTION = "## Reading the Parquet without opsaudit"
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(scope="module")
def loopback_env() -> Iterator[None]:
    """What tests/conftest.py's clean_environ does per test, for the module's fixtures; and no
    Spark settings from outside (SPARK_HOME, PYSPARK_SUBMIT_ARGS --packages: downloads)."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if (
                name.upper() in _PROXY_VARS
                or name.startswith(("OPSAUDIT_", "SPARK_", "PYSPARK_"))
                or name == "NEON_API_KEY"
            ):
                mp.delenv(name)
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM's own address lookup: loopback too
        yield


@dataclass
class Synced:
    data_dir: Path
    sim: Simulator

    def sync(self, data_dir: Path) -> RunSummary:
        """One unpaced sync with small commits: many small files, so compaction runs."""
        summary = sync(
            SyncConfig(
                data_dir=data_dir,
                api_key=self.sim.personal_key,
                base_url=self.sim.base_url,
                max_rps=None,
                retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
                commit_rows=20,
                commit_seconds=0.2,
                spill_rows=None,  # commits of commit_rows, not rows written ahead
                limits=WalkLimits(page_size=20, flush_rows=20),
            )
        )
        assert summary.outcome == "ok", summary
        return summary


@pytest.fixture(scope="module")
def synced(loopback_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synced]:
    config = SimConfig(
        seed=21,
        projects=3,
        shared_projects=0,
        orgs=1,
        days=10,  # 2025-01-25 .. 2025-02-04: two created_month partitions
        ops_per_project_per_day=80,
        start="2025-02-04T12:00:00Z",
        live_ops_per_project_per_hour=40,
    )
    with Simulator(config) as sim:
        out = Synced(tmp_path_factory.mktemp("spark-data") / "data", sim)
        out.sync(out.data_dir)  # the backfill (compacted; opsaudit.duckdb written)
        # Held open like a DuckDB shell would (the sync cannot refresh it, in-process too).
        holder = duckdb.connect(str(out.data_dir / "opsaudit.duckdb"))
        try:
            sim.advance(8 * 3600)  # ~1,000 new operations: ~50 small files, compacted
            out.sync(out.data_dir)
            for _ in range(3):  # operations still open move on: new versions of them
                sim.advance(900)
                out.sync(out.data_dir)
        finally:
            holder.close()
        yield out


@pytest.fixture(scope="module")
def spark(loopback_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    scratch = tmp_path_factory.mktemp("spark-scratch")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("opsaudit-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.local.dir", str(scratch))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        # A short-lived JVM: the C1 compiler only and one GC thread start and finish sooner
        # (about a third off this module's time on two cores).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # stop() leaves the JVM running until Python exits: end it now, not at the end of the suite
    # (it exits when its stdin closes: pyspark.java_gateway.launch_gateway).
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def readme_block(label: str, language: str) -> str:
    """The code block that follows the line starting with `label` in README's section."""
    text = README.read_text()
    section = text[text.index(_SECTION) :]
    section = section[: section.index("\n## ", 1)]
    pattern = rf"^{re.escape(label)}[^\n]*:\n\n```{language}\n(.*?)^```$"
    blocks = re.findall(pattern, section, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"README's {label} block ({_SECTION})"
    block: str = blocks[0]
    return block


def readme_spark_block() -> str:
    return readme_block("Spark", "python")


def run_readme_block(spark: SparkSession, data_dir: Path) -> dict[str, Any]:
    """README's Spark block on `data_dir`: its variables (versions, operations, projects)."""
    code = readme_spark_block()
    assert f'spark.read.parquet("{README_ROOT}/operation_versions")' in code
    namespace: dict[str, Any] = {"spark": spark}
    code = code.replace(README_ROOT, data_dir.as_posix())
    exec(compile(code, "README.md (Spark block)", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def readme(spark: SparkSession, synced: Synced) -> dict[str, Any]:
    return run_readme_block(spark, synced.data_dir)


def query(data_dir: Path, sql: str) -> list[dict[str, Any]]:
    """`opsaudit query --format json`, the real CLI."""
    result = CliRunner().invoke(
        cli,
        ["query", "--data-dir", str(data_dir), "--format", "json", sql],
        prog_name="opsaudit",
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)
    return rows


def spark_files(df: DataFrame, data_dir: Path) -> set[str]:
    """The files a DataFrame reads, relative to the data directory."""
    root = data_dir.resolve()
    return {
        Path(unquote(urlparse(uri).path)).resolve().relative_to(root).as_posix()
        for uri in df.inputFiles()
    }


def parquet_files(data_dir: Path) -> set[str]:
    return {
        p.relative_to(data_dir).as_posix()
        for p in (data_dir / "operation_versions").glob("*/*.parquet")
    }


# Every column of operation_versions, times as UTC microseconds since the epoch, plus the
# created_month a Spark user filters on: Spark's Hive partition value, opsaudit's UTC month of
# created_at (the view has no such column).
VERSION_COLUMNS = [
    "id",
    "project_id",
    "branch_id",
    "endpoint_id",
    "action",
    "status",
    "failures_count",
    "error",
    "retry_at",
    "created_at",
    "updated_at",
    "total_duration_ms",
    "raw",
    "version",
    "observed_at",
    "run_id",
    "created_date",
    "created_month",
]
TIMES = {"retry_at", "created_at", "updated_at", "observed_at"}

VERSIONS_SQL = (
    "SELECT "
    + ", ".join(
        f"epoch_us({c}) AS {c}"
        if c in TIMES
        else "strftime(created_at, '%Y-%m') AS created_month"
        if c == "created_month"
        else c
        for c in VERSION_COLUMNS
    )
    + " FROM operation_versions"
)


def spark_versions(versions: DataFrame) -> list[tuple[Any, ...]]:
    columns = [
        F.unix_micros(c).alias(c)
        if c in TIMES
        else F.col(c).cast("string").alias(c)
        if c == "created_date"
        else F.col(c)
        for c in VERSION_COLUMNS
    ]
    return [tuple(r) for r in versions.select(*columns).collect()]


def test_spark_types(readme: dict[str, Any]) -> None:
    """TIMESTAMP WITH TIME ZONE (Parquet isAdjustedToUTC) is Spark's TIMESTAMP (instants, not
    TIMESTAMP_NTZ); `created_month=2025-01` stays a string (not inferred as a date)."""
    types = {f.name: f.dataType for f in readme["versions"].schema.fields}
    assert set(types) == set(VERSION_COLUMNS)
    for name in TIMES:
        assert types[name] == T.TimestampType(), name
    assert types["created_date"] == T.DateType()
    assert types["created_month"] == T.StringType()
    assert types["version"] == T.IntegerType()
    assert types["failures_count"] == types["total_duration_ms"] == T.LongType()
    projects = {f.name: f.dataType for f in readme["projects"].schema.fields}
    assert projects["first_seen_at"] == projects["last_seen_at"] == T.TimestampType()
    assert readme["operations"].columns == readme["versions"].columns


def test_the_directory_holds_compaction_leftovers_which_the_dedup_removes(
    spark: SparkSession, synced: Synced, readme: dict[str, Any]
) -> None:
    data_dir = synced.data_dir
    committed = set(committed_files(data_dir) or [])
    leftovers = parquet_files(data_dir) - committed
    # The scenario is real: compaction ran, and the held views database kept its inputs.
    assert any("/part-compact-" in f for f in committed)
    assert len(leftovers) >= 10, leftovers
    assert {f.split("/")[1] for f in committed} == {
        "created_month=2025-01",
        "created_month=2025-02",
    }
    # README reads the directory: Spark sees every file there, committed or not ...
    bare = spark.read.parquet(f"{data_dir}/operation_versions")
    assert spark_files(bare, data_dir) == committed | leftovers
    assert spark_files(readme["versions"], data_dir) == committed | leftovers
    # ... so the leftovers' rows twice; the dedup leaves exactly the committed rows.
    committed_rows = sum(pq.ParquetFile(data_dir / f).metadata.num_rows for f in committed)
    leftover_rows = sum(pq.ParquetFile(data_dir / f).metadata.num_rows for f in leftovers)
    assert bare.count() == committed_rows + leftover_rows
    assert readme["versions"].count() == committed_rows
    assert query(data_dir, "SELECT count(*) AS n FROM operation_versions") == [
        {"n": committed_rows}
    ]


def test_every_version_agrees_exactly(synced: Synced, readme: dict[str, Any]) -> None:
    ours = [tuple(r[c] for c in VERSION_COLUMNS) for r in query(synced.data_dir, VERSIONS_SQL)]
    theirs = spark_versions(readme["versions"])
    assert len(theirs) == len(ours)
    pairs = {(r[0], r[13]) for r in ours}  # (id, version)
    assert {(r[0], r[13]) for r in theirs} == pairs
    assert len(pairs) == len(ours)  # no (id, version) twice
    # Several versions per operation: operation_versions differs from operations.
    per_id = Counter(op_id for op_id, _ in pairs)
    assert sum(1 for n in per_id.values() if n > 1) >= 20
    assert Counter(theirs) == Counter(ours)  # every column of every row, times to the us


def test_latest_state_agrees_with_operations(synced: Synced, readme: dict[str, Any]) -> None:
    ours = query(synced.data_dir, "select id, status, version from operations")
    theirs = [tuple(r) for r in readme["operations"].select("id", "status", "version").collect()]
    assert len(theirs) == len(ours) == len({r[0] for r in theirs})
    assert set(theirs) == {(r["id"], r["status"], r["version"]) for r in ours}
    assert len(ours) < readme["versions"].count()  # some operations have several versions


def test_counts_per_month_action_status(synced: Synced, readme: dict[str, Any]) -> None:
    ours = query(
        synced.data_dir,
        "SELECT strftime(created_at, '%Y-%m') AS created_month, action, status, count(*) AS n "
        "FROM operations GROUP BY ALL",
    )
    theirs = readme["operations"].groupBy("created_month", "action", "status").count().collect()
    expected = {(r["created_month"], r["action"], r["status"]): r["n"] for r in ours}
    assert {(r[0], r[1], r[2]): r[3] for r in theirs} == expected
    assert {month for month, _, _ in expected} == {"2025-01", "2025-02"}
    assert len({status for _, _, status in expected}) >= 3


def test_sum_of_total_duration_ms(synced: Synced, readme: dict[str, Any]) -> None:
    ours = query(
        synced.data_dir,
        "SELECT (SELECT sum(total_duration_ms) FROM operation_versions) AS versions, "
        "(SELECT sum(total_duration_ms) FROM operations) AS operations",
    )
    theirs = {
        name: readme[name].agg(F.sum("total_duration_ms")).collect()[0][0]
        for name in ("versions", "operations")
    }
    assert theirs == ours[0]
    assert theirs["operations"] > 0


def test_projects_agree(synced: Synced, readme: dict[str, Any]) -> None:
    ours = query(
        synced.data_dir,
        "SELECT id, epoch_us(first_seen_at) AS first_seen_at, "
        "epoch_us(last_synced_at) AS last_synced_at, open_operations FROM projects",
    )
    theirs = readme["projects"].select(
        "id", F.unix_micros("first_seen_at"), F.unix_micros("last_synced_at"), "open_operations"
    )
    rows = [tuple(r) for r in theirs.collect()]
    assert len(rows) == len(ours) == len(synced.sim.project_ids()) == 3
    assert {r[0] for r in rows} == set(synced.sim.project_ids())
    assert set(rows) == {tuple(r.values()) for r in ours}


def test_the_next_run_deletes_the_leftovers(
    spark: SparkSession, synced: Synced, tmp_path: Path
) -> None:
    """Nothing holding opsaudit.duckdb open: after a run the directory holds only the
    committed files, and README's read is exactly `opsaudit query` again (on a copy)."""
    copy = tmp_path / "data"
    shutil.copytree(synced.data_dir, copy)
    assert parquet_files(copy) - set(committed_files(copy) or [])
    synced.sync(copy)
    committed = set(committed_files(copy) or [])
    assert parquet_files(copy) == committed
    namespace = run_readme_block(spark, copy)
    assert spark_files(namespace["versions"], copy) == committed
    ours = [tuple(r[c] for c in VERSION_COLUMNS) for r in query(copy, VERSIONS_SQL)]
    assert Counter(spark_versions(namespace["versions"])) == Counter(ours)


# -- DuckDB, Polars, pandas: README's blocks, on the same directory (leftovers included) -----


def _expected(synced: Synced) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(id, version, status) of every version, and of every latest state, by opsaudit query."""
    versions = query(synced.data_dir, "SELECT id, version, status FROM operation_versions")
    latest = query(synced.data_dir, "SELECT id, version, status FROM operations")
    as_set = lambda rows: {(r["id"], r["version"], r["status"]) for r in rows}  # noqa: E731
    assert len(latest) < len(versions)  # some operations have several versions
    return as_set(versions), as_set(latest)


def _python_block(label: str, data_dir: Path) -> dict[str, Any]:
    code = readme_block(label, "python")
    assert README_ROOT in code
    namespace: dict[str, Any] = {}
    exec(
        compile(code.replace(README_ROOT, data_dir.as_posix()), f"README.md ({label})", "exec"),
        namespace,
    )
    return namespace


def test_duckdb_block(synced: Synced) -> None:
    assert parquet_files(synced.data_dir) - set(committed_files(synced.data_dir) or [])
    block = readme_block("DuckDB", "sql").replace(README_ROOT, synced.data_dir.as_posix())
    code = "\n".join(line for line in block.splitlines() if not line.startswith("--"))
    versions_sql, latest_sql = (part.strip() for part in code.split(";") if part.strip())
    con = duckdb.connect()
    try:
        versions = con.execute(f"SELECT id, version, status FROM ({versions_sql})").fetchall()
        latest = con.execute(f"SELECT id, version, status FROM ({latest_sql})").fetchall()
    finally:
        con.close()
    expected_versions, expected_latest = _expected(synced)
    assert len(versions) == len(expected_versions) and set(versions) == expected_versions
    assert len(latest) == len(expected_latest) and set(latest) == expected_latest


def test_polars_block(synced: Synced) -> None:
    namespace = _python_block("Polars", synced.data_dir)
    expected_versions, expected_latest = _expected(synced)
    for name, expected in (("versions", expected_versions), ("operations", expected_latest)):
        rows = namespace[name].select("id", "version", "status").collect().rows()
        assert len(rows) == len(expected) and set(rows) == expected, name


def test_pandas_block(synced: Synced) -> None:
    namespace = _python_block("pandas", synced.data_dir)
    expected_versions, expected_latest = _expected(synced)
    for name, expected in (("versions", expected_versions), ("operations", expected_latest)):
        frame = namespace[name][["id", "version", "status"]]
        rows = [tuple(r) for r in frame.itertuples(index=False)]
        assert len(rows) == len(expected) and set(rows) == expected, name
