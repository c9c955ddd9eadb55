"""Where things live in a data directory (DESIGN.md, data directory layout), and how a file in
it is replaced durably (`write_aside`, `fsync_dir`, `replace_durably`, `replace_output`).

Kept apart from `store.local.dataset` so that the commands which only read (`query`, `report`, `status`,
`check`) find the state and the files without importing pyarrow (start-up, PRODUCT.md
performance targets).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from exporter.core.names import TABLES as NAMES_TABLES

VERSIONS_DIR = "operation_versions"
VERSIONS_GLOB = "operation_versions/*/*.parquet"
# The superseded record (issue 24): one (id, version) row for every version a later one of the
# same operation replaced, written in the commit that adds the later version. `operations` is
# the versions minus these rows (sql/00_base.sql).
SUPERSEDED_DIR = "superseded"
SUPERSEDED_GLOB = "superseded/*.parquet"
SUPERSEDED_PARTITION = "superseded"  # the `files.partition` of its files (compacted apart)
# The state's meta key saying the record is complete for every committed version: set by the
# one-time migration of a dataset written before it (`Dataset.record_superseded`); without it
# readers derive the set from the versions themselves.
SUPERSEDED_META = "superseded_recorded"
# The report's summary record (issue 24, `store.local.summary`): every committed version's
# counts and duration histograms per created month, written in the commit that adds the
# versions; `SUMMARY_META` marks it complete (the one-time migration, `Dataset.record_summary`),
# without which readers derive it from the versions (sql/90_report.sql, report_summary_of).
SUMMARY_DIR = "summary"
SUMMARY_GLOB = "summary/*.parquet"
# Its files' `files.partition`: "summary/created_month=YYYY-MM" per month (compacted per month:
# merged, the rows of a key summed), "summary" for the one-time migration's file.
SUMMARY_PARTITION = "summary"
SUMMARY_META = "summary_recorded"
# ... and its total over all months, for a report of all time (issue 24): the sum of exactly the
# summary files whose names its own name hashes (`summary_total_file`), written after the commits
# by the analytics layer (`analytics.summary_total`); a reader uses it only when its name is that
# of the summary files committed now (else there is none: the report reads the months).
SUMMARY_TOTAL_DIR = "summary_total"
SUMMARY_TOTAL_GLOB = "summary_total/*.parquet"
# The report's flagged record (issue 24, `store.local.spill.flagged_record`): every committed
# version that is not terminal or carries an error text, with the columns `report_rows` reads,
# written in the commit that adds the versions; `FLAGGED_META` marks it complete (the one-time
# migration, `Dataset.record_flagged`), without which the report reads every version for them
# (sql/90_report.sql, report_rows).
FLAGGED_DIR = "flagged"
FLAGGED_GLOB = "flagged/*.parquet"
FLAGGED_PARTITION = "flagged"  # the `files.partition` of its files (compacted apart)
FLAGGED_META = "flagged_recorded"
PROJECTS_FILE = "projects/projects.parquet"
SYNC_RUNS_FILE = "sync_runs/sync_runs.parquet"
STAGING_DIR = "_staging"
STATE_FILE = "state.sqlite"
LOCK_FILE = ".lock"
VIEWS_DB = "opsaudit.duckdb"

# Each table the views read, once: the path the .sql files read it from (relative to the data
# directory) and its base view. Every kind of storage answers for these paths
# (`store.base.Reader.sources`).
BASE_VIEWS = {
    VERSIONS_GLOB: "stored_operation_versions",
    PROJECTS_FILE: "projects",
    SYNC_RUNS_FILE: "sync_runs",
    **{t.file: t.name for t in NAMES_TABLES},
}
# The paths the .sql files read: the base views' and the three records' (they have no view).
SOURCES = (*BASE_VIEWS, SUPERSEDED_GLOB, SUMMARY_GLOB, SUMMARY_TOTAL_GLOB, FLAGGED_GLOB)
# The tables written from the state alone (table -> file), whole at each write (projects and sync_runs by every
# sync, a names table when the names change): nothing is lost with their files (a damaged one,
# `store.local.reader.damaged_file`, `store.lake.tables.LakeDataset._damaged`).
FROM_STATE_FILES = {
    "projects": PROJECTS_FILE,
    "sync_runs": SYNC_RUNS_FILE,
    **{t.name: t.file for t in NAMES_TABLES},
}


def summary_total_file(summary_files: Iterable[str]) -> str:
    """The path (relative to the data directory) of the summary's total over `summary_files`
    (paths relative to it): named by a hash of their sorted names, so a total of other files
    (older ones, before a commit or a merge) is never taken for it. Files are never rewritten
    under the same name (each write has a new one), so the names say what they hold."""
    digest = hashlib.sha256("\n".join(sorted(summary_files)).encode()).hexdigest()[:32]
    return f"{SUMMARY_TOTAL_DIR}/total-{digest}.parquet"


def any_file(directory: Path, pattern: str) -> bool:
    """Whether `pattern` matches anything under `directory` (the directory scan is closed at
    once: an abandoned glob leaves an open scandir iterator, a ResourceWarning)."""
    matches = directory.glob(pattern)
    try:
        return next(matches, None) is not None
    finally:
        matches.close()


def has_state(root: Path) -> bool:
    """Whether `root` holds a state file: an empty one is none (SQLite names a file of 0 bytes
    before it writes its first page, and a failed restore or `> state.sqlite` leaves one)."""
    try:
        return (root / STATE_FILE).stat().st_size > 0
    except (FileNotFoundError, NotADirectoryError):
        return False


def stateless_data(root: Path) -> str | None:
    """Why `root` is no dataset to sync or to report on: Parquet data with no state (or an empty
    one) beside it. Taken for a new dataset, a sync would start the history again, every version
    1, and leave every earlier file out of the views. None when that is not so."""
    if has_state(root) or not any_file(root / VERSIONS_DIR, "*/*.parquet"):
        return None
    which = "an empty" if (root / STATE_FILE).exists() else "no"
    return (
        f"{root} holds Parquet data but {which} {STATE_FILE}: syncing into it would duplicate "
        "history. Restore the state file or use an empty --data-dir."
    )


def find_sql_dir() -> Path | None:
    """Where the .sql files are: `exporter/sql` in a wheel, `<repo>/sql` in an editable install."""
    package = Path(__file__).resolve().parents[1]  # exporter/
    for candidate in (package / "sql", package.parent / "sql"):
        if candidate.is_dir() and any_file(candidate, "*.sql"):
            return candidate
    return None


def write_all(fd: int, data: Any) -> None:
    """Write every byte of `data` (bytes, or any buffer: Arrow's) to `fd`: `os.write` may
    write only part of it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def appended_whole(fd: int) -> Iterator[None]:
    """What is appended to `fd` inside stays whole or not at all: an append that fails part
    way (a full disk: some bytes written, then ENOSPC) is cut back to where it began, so the
    file grows only by whole lines. A kill in the midst leaves what it wrote: the next
    append's reader mends that (`events.delivery`)."""
    size = os.fstat(fd).st_size
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):  # cutting needs no space
            os.ftruncate(fd, size)
        raise


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in directory `path` durable (power loss, PRODUCT.md
    crash-safe)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_aside(target: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write a hidden temporary sibling of `target` with `write(file)` and fsync it; returns
    its path (the caller renames it into place, then unlinks it if it is still there)."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def replace_durably(
    target: Path, write: Callable[[BinaryIO], object], *, mode: int | None = None
) -> None:
    """Replace `target` atomically and durably: write aside, fsync, rename over it, fsync the
    directory. Readers see the old file or the new one, never a part of either."""
    tmp = write_aside(target, write)
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(target.parent)


def replace_output(path: Path, data: bytes) -> None:
    """Write a file the user named (`-o FILE`) whole or not at all: written in place, a write
    that failed part way (a full disk, a kill) left a cut file where the previous one was.
    A symlink's target is replaced (not the link), keeping the old file's mode; a FIFO or a
    device is written in place: there is no file to replace. So is `/dev/stdout` (any name
    under /dev or /proc), whatever file the shell redirected it to: that one is the caller's
    to write, not to replace."""
    target = Path(os.path.realpath(path))
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    special = Path(os.path.abspath(path)).parts[1:2] in (("dev",), ("proc",))
    if special or (mode is not None and not stat.S_ISREG(mode)):
        # Appended: `/dev/stdout` opened anew is the file the shell redirected to, with what
        # was written before (`{ echo header; opsaudit ... -o /dev/stdout; } > f`): "wb" cut it.
        with open(path, "ab") as fh:
            fh.write(data)
        return
    kept = None if mode is None else stat.S_IMODE(mode)
    try:
        replace_durably(target, lambda fh: fh.write(data), mode=kept)
    except PermissionError:
        if mode is None:
            raise
        # A file this user may write in a directory it may not create one in (0555: a report
        # under /var/log), rename over (sticky, another's file) or open to make the rename
        # durable (0333): written in place, as a shell's `>` (and opsaudit before) wrote it.
        _write_in_place(target, data)


def _write_in_place(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
