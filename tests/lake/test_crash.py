"""kill -9 of a writer at every step of a commit, then a fresh-machine restart: the table ends
exactly as an uninterrupted run's (no duplicate, no loss), and so does every reader between kills.

The S3 server kills the writer itself when the writer sends a chosen request (moto_server.py
`/_ctl/arm`): before or after the state object upload, after a data file upload (files written,
log not), before the log entry (not written) and after it (written, the writer never hears).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from exporter.store.lake import LakeDataset, parse_location

WRITER = Path(__file__).with_name("crash_writer.py")
REPO = Path(__file__).parents[2]
BATCHES = 8
ROWS = 40


def _run_writer(
    root: Any,
    workdir: Path,
    *,
    arm: Any = None,
    kill_at: tuple[int, float] | None = None,
    batches: int = BATCHES,
    later: bool = False,
) -> int:
    """Run the writer; `arm(pid)` lets the server kill it, `kill_at=(k, delay)` kills it `delay`
    seconds after it reported its k-th commit of this run; `later`: batches that supersede
    versions of the one before (crash_writer.py)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            root.url,
            json.dumps(root.options),
            str(batches),
            str(ROWS),
            str(workdir),
            *(["later"] if later else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        # this checkout's code, also when a copy of it runs the test (scripts/mutants.py)
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if arm is not None:
        arm(proc.pid)
    try:
        if kill_at is not None:
            assert proc.stdout is not None
            for _ in range(kill_at[0]):
                if not proc.stdout.readline():
                    break
            time.sleep(kill_at[1])
            proc.send_signal(signal.SIGKILL)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"writer failed ({proc.returncode}): {err[-2000:]}")
    return proc.returncode


def _expected(batches: int) -> list[str]:
    return [f"op-{n:08d}" for n in range(batches * ROWS)]


def _check_readers(root: Any, batches: int = BATCHES) -> int:
    """All readers see the same exact prefix of batches; returns the committed batch count."""
    import polars as pl
    from deltalake import DeltaTable

    ds = LakeDataset.open(parse_location(root.url, root.options), create=True)
    committed = ds.committed_version() or 0
    snap = ds.snapshot("operation_versions")
    if snap is None:
        assert committed == 0
        return 0
    via_arrow = sorted(snap.to_table(columns=["id"])["id"].to_pylist())
    uri = ds.location.table_uri("operation_versions")
    via_delta = sorted(
        DeltaTable(uri, storage_options=ds.options)
        .to_pyarrow_table(columns=["id"])["id"]
        .to_pylist()
    )
    via_polars = sorted(pl.read_delta(uri, storage_options=ds.options)["id"].to_list())
    con = duckdb.connect()
    con.register("operation_versions", snap)
    via_duckdb = [
        r[0] for r in con.execute("SELECT id FROM operation_versions ORDER BY id").fetchall()
    ]
    # the table may be one commit ahead of the txn we read first if a writer is running; here
    # none is, so all agree exactly
    assert via_arrow == via_delta == via_polars == via_duckdb == _expected(committed)
    return committed


class _Watcher(threading.Thread):
    """Reads the table's current snapshot over and over: it must always be an exact prefix of
    the batches (whole batches, each once), whatever instant it looks at."""

    def __init__(self, root: Any):
        super().__init__(daemon=True)
        self.root = root
        self.looks = 0
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        ds = LakeDataset.open(parse_location(self.root.url, self.root.options), create=True)
        uri = ds.location.table_uri("operation_versions")
        while not self._halt.wait(0.05):
            try:
                ids = DeltaTable(uri, storage_options=ds.options).to_pyarrow_table(columns=["id"])
            except TableNotFoundError:
                continue
            got = sorted(ids["id"].to_pylist())
            if len(got) % ROWS or got != _expected(len(got) // ROWS):
                self.errors.append(f"{len(got)} rows, not a prefix of whole batches")
            self.looks += 1

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _s3_arms() -> list[tuple[str, str, str]]:
    # (method, path pattern, when): each kills one run at a different step of one commit
    return [
        ("PUT", r"/_opsaudit/state/000000000002-", "before"),  # state not uploaded
        ("PUT", r"/_opsaudit/state/000000000003-", "after"),  # state uploaded, nothing else
        ("PUT", r"/operation_versions/created_month=2024-04/.*\.parquet$", "after"),  # data, no log
        ("PUT", r"/operation_versions/_delta_log/0+4\.json$", "before"),  # log entry not written
        ("PUT", r"/operation_versions/_delta_log/0+5\.json$", "after"),  # written, answer lost
    ]


def test_kill_at_each_commit_step_on_s3(bucket: Any, tmp_path: Path) -> None:
    root = SimpleNamespace(url=bucket.url(), options=bucket.options)
    seen = [_check_readers(root)]
    watcher = _Watcher(root)  # a reader looking all the time, while writers run and die
    watcher.start()
    try:
        for i, (method, pattern, when) in enumerate(_s3_arms()):
            code = _run_writer(
                root,
                tmp_path / f"host-{i}",
                arm=lambda pid, m=method, p=pattern, w=when: bucket.server.arm(pid, m, p, w),
            )
            assert code == -signal.SIGKILL, f"arm {pattern} did not fire"
            seen.append(_check_readers(root))
        assert _run_writer(root, tmp_path / "host-final") == 0
    finally:
        watcher.stop()
    assert watcher.looks > 5 and watcher.errors == [], (watcher.looks, watcher.errors[:3])
    seen.append(_check_readers(root))
    assert seen == sorted(seen) and seen[-1] == BATCHES, seen
    print("committed batches seen between kills:", seen)
    # The kills left orphans (a state object without a commit, data files outside the log):
    # the next start removed the orphan states; vacuum removes the files outside the log.
    ds = LakeDataset.open(parse_location(root.url, root.options))
    states = bucket.list_keys(f"{bucket.url().split('/', 3)[3]}/_opsaudit/state/")
    assert all(int(k.rsplit("/", 1)[1][:12]) <= BATCHES for k in states)
    parquet_before = [
        k for k in bucket.list_keys() if k.endswith(".parquet") and "_delta_log" not in k
    ]
    assert len(parquet_before) > BATCHES  # the orphan of the "data, no log" kill at least
    from datetime import timedelta

    ds.vacuum(retention=timedelta(0), force=True)
    parquet_after = [
        k for k in bucket.list_keys() if k.endswith(".parquet") and "_delta_log" not in k
    ]
    assert len(parquet_after) == BATCHES
    assert _check_readers(root) == BATCHES


def test_kill_at_random_instants_local(tmp_path: Path) -> None:
    root = SimpleNamespace(url=f"file://{tmp_path}/trail", options={})
    rng = random.Random(11)
    batches = 40
    seen = [_check_readers(root)]
    for i in range(6):
        # a random instant inside a commit: a few commits in, then 0-25 ms more
        code = _run_writer(
            root,
            tmp_path / f"host-{i}",
            kill_at=(rng.randint(1, 4), rng.uniform(0, 0.025)),
            batches=batches,
        )
        assert code == -signal.SIGKILL
        seen.append(_check_readers(root))
    assert _run_writer(root, tmp_path / "host-final", batches=batches) == 0
    seen.append(_check_readers(root))
    assert seen == sorted(seen) and seen[-1] == batches, seen
    print("committed batches seen between kills:", seen)


_COMPACT = """
import json, sys
from exporter.store.lake import LakeDataset, parse_location
ds = LakeDataset.open(parse_location(sys.argv[1], json.loads(sys.argv[2])))
print(ds.compact(), flush=True)
"""


def test_kill_during_compaction_on_s3(bucket: Any, tmp_path: Path, make_versions: Any) -> None:
    """Compaction killed after uploading its merged file but before its commit: the table is
    unchanged and exact; compaction run again works; vacuum then removes both the replaced
    files and the orphan of the killed compaction."""
    from datetime import date, timedelta

    root = SimpleNamespace(url=bucket.url(), options=bucket.options)
    ds = LakeDataset.open(parse_location(root.url, root.options), create=True)
    state = tmp_path / "s.sqlite"
    state.write_bytes(b"state")
    for n in range(1, 7):
        ds.commit(make_versions(n - 1, ROWS, month=date(2024, 5, 1)), state, n)
    script = tmp_path / "compact.py"
    script.write_text(_COMPACT)
    args = [sys.executable, str(script), root.url, json.dumps(root.options)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, text=True)
    bucket.server.arm(proc.pid, "PUT", r"/operation_versions/created_month=2024-05/", "after")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, out
    assert _check_readers(root) == 6
    assert len(ds.file_uris("operation_versions")) == 6
    data_files = [k for k in bucket.list_keys() if k.endswith(".parquet") and "_delta_log" not in k]
    assert len(data_files) == 7  # six live files + the killed compaction's merged file
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    fresh = LakeDataset.open(parse_location(root.url, root.options))
    assert len(fresh.file_uris("operation_versions")) == 1
    assert fresh.committed_version() == 6  # compaction keeps the txn
    assert _check_readers(root) == 6
    fresh.vacuum(retention=timedelta(0), force=True)
    data_files = [k for k in bucket.list_keys() if k.endswith(".parquet") and "_delta_log" not in k]
    assert len(data_files) == 1
    assert _check_readers(root) == 6


def test_a_killed_runs_scratch_copy_of_the_state_is_removed_by_the_next(
    bucket: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A run on object storage keeps its state's local copy in a scratch directory, removed
    when it ends. kill -9 left it for good: a cron job killed now and then (OOM, timeouts)
    filled the temporary directory with copies of the state. The next run removes those of
    processes that are gone, and no other."""
    import tempfile

    from exporter.store.lake.store import LakeStore

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    code = (
        "import sys, time\n"
        "from exporter.store.lake import parse_location\n"
        "from exporter.store.lake.store import LakeStore\n"
        "store = LakeStore(parse_location(sys.argv[1], dict(a.split('=', 1) for a in sys.argv[2:])))\n"
        "print(store._tmp, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, bucket.url(), *bucket.storage_options()],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert child.stdout is not None
    left = Path(child.stdout.readline().strip())
    child.kill()
    child.wait()
    child.stdout.close()
    assert left.is_dir() and left.parent == scratch
    (left / "state.sqlite").write_bytes(b"x" * 1000)  # what a run keeps there
    unknown = scratch / "opsaudit-lake-k2j4h1x9"  # an older name: whose is not known, kept
    unknown.mkdir()
    store = LakeStore(parse_location(bucket.url(), bucket.options))
    try:
        mine = store._tmp
        assert sorted(p.name for p in scratch.iterdir()) == sorted([mine.name, unknown.name])
        # A second store of this process (alive) keeps the first's.
        other = LakeStore(parse_location(bucket.url(), bucket.options), lock=False)
        assert mine.is_dir()
        other.close()
    finally:
        store.close()
    assert sorted(p.name for p in scratch.iterdir()) == [unknown.name]
    # A reader's copy (`status`, `check` on object storage) too, killed while it read.
    from exporter.core.errors import NoDatasetError
    from exporter.store.readers import reading

    reader = subprocess.run(
        [
            sys.executable,
            "-c",
            "from exporter.core.scratch import scratch_dir as s; "
            "p = s('opsaudit-read-'); (p / 'state.sqlite').write_bytes(b'x'); print(p)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert Path(reader.stdout.strip()).is_dir()  # its process ended without removing it
    with pytest.raises(NoDatasetError), reading(bucket.url(), bucket.storage_options()):
        pass  # (no batch committed there: the reader's own copy is removed as it fails)
    assert sorted(p.name for p in scratch.iterdir()) == [unknown.name]
