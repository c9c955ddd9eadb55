"""A local data directory as the views read it (`store.base.Reader`): the committed files the
state lists, never a glob of the directory (DESIGN.md, commit protocol)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exporter.core.errors import StorageError
from exporter.core.layout import (
    FLAGGED_DIR,
    FLAGGED_GLOB,
    FLAGGED_META,
    FROM_STATE_FILES,
    LOCK_FILE,
    SOURCES,
    STATE_FILE,
    SUMMARY_DIR,
    SUMMARY_GLOB,
    SUMMARY_META,
    SUMMARY_TOTAL_DIR,
    SUMMARY_TOTAL_GLOB,
    SUPERSEDED_DIR,
    SUPERSEDED_GLOB,
    SUPERSEDED_META,
    SYNC_RUNS_FILE,
    VERSIONS_DIR,
    VERSIONS_GLOB,
    has_state,
    summary_total_file,
)
from exporter.core.model import RunRow
from exporter.core.names import EXPORTED_META, Table, to_arrow
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.store.base import Source
from exporter.store.state import StateDB, settled_runs


class LocalReader:
    """`store.base.Reader` for a local directory of Hive Parquet beside its SQLite state."""

    def __init__(self, root: Path, label: str) -> None:
        self.root = root
        self.label = label

    def sources(self, con: Any, tag: str) -> dict[str, Source]:
        root = self.root.resolve()
        out = local_sources(root)
        # The names as the state has them while their files lag behind it (a run in progress,
        # or killed after its commits and before its export): the operations read are the
        # state's committed files, so their names must be the state's too (issue 21).
        for table, rows in _names_not_exported(root):
            from exporter.core.duck import whole_package  # not in a sync: no engine there

            whole_package()  # DuckDB scans an Arrow table through the package's readers
            relation = f"_opsaudit_{table.name}{tag}"
            con.register(relation, rows)
            out[table.file] = f"(SELECT * FROM {relation})"
        runs = _runs_not_exported(root, out[SYNC_RUNS_FILE])
        if runs is not None:  # a run in progress, or killed: as `status` shows it
            out[SYNC_RUNS_FILE] = runs
        return out

    def readable_paths(self) -> tuple[list[Path], list[Path]]:
        return readable_parts(self.root)


def committed_files(data_dir: Path) -> list[str] | None:
    """The `operation_versions` files a reader may read (relative paths): the state's list of
    committed files.

    Readers never glob the directory: a killed run's leftovers, a stray copy and a compaction's
    replaced inputs are not in the list (DESIGN.md, commit protocol). None when the directory has
    no state file (Parquet copied elsewhere): then the files found are read as they are.
    """
    committed = _committed(data_dir)
    return None if committed is None else committed[0]


def committed_summary(data_dir: Path) -> list[str] | None:
    """The committed files of the summary record (relative paths); None when the dataset has no
    state or its record is not complete yet."""
    committed = _committed(data_dir)
    return None if committed is None else committed[2]


def _open_state(data_dir: Path) -> StateDB | None:
    """The state, read-only (a reader never creates or migrates it); None without a state file."""
    if not has_state(data_dir):
        return None
    state_path = data_dir / STATE_FILE
    # A corrupt, foreign or newer state is the state's error (exit 6), not the SQL's.
    return StateDB(state_path, read_only=True)


def _committed(
    data_dir: Path,
) -> tuple[list[str], list[str] | None, list[str] | None, list[str] | None] | None:
    """The committed versions files, superseded, summary and flagged files (None: that record
    is not complete yet, readers derive it), from the state; None without a state file."""
    state = _open_state(data_dir)
    if state is None:
        return None
    try:
        files = state.live_files()
        superseded = state.get_meta(SUPERSEDED_META) == "1"
        summary = state.get_meta(SUMMARY_META) == "1"
        flagged = state.get_meta(FLAGGED_META) == "1"
    finally:
        state.close()
    by_dir: dict[str, list[str]] = {
        VERSIONS_DIR: [],
        SUPERSEDED_DIR: [],
        SUMMARY_DIR: [],
        FLAGGED_DIR: [],
    }
    for f in files:
        by_dir[f.split("/", 1)[0]].append(f)
    return (
        by_dir[VERSIONS_DIR],
        by_dir[SUPERSEDED_DIR] if superseded else None,
        by_dir[SUMMARY_DIR] if summary else None,
        by_dir[FLAGGED_DIR] if flagged else None,
    )


def _names_not_exported(data_dir: Path) -> list[tuple[Table, Any]]:
    """The names tables (Arrow) from the state when its names changed since the Parquet files
    were written (`EXPORTED_META`); [] when the files are current (then nothing loads pyarrow).
    Read after the committed files: names at least as new as the operations read."""
    state = _open_state(data_dir)
    if state is None:
        return []
    try:
        if not state.keeps_names() or state.get_meta(EXPORTED_META) == state.names_generation():
            return []  # the files are current, or a state from before the names has none
        return [(t, to_arrow(t, state.names_rows(t))) for t in NAMES_TABLES]
    finally:
        state.close()


# The SQL type of each `sync_runs` column (core.tables.SYNC_RUNS_SCHEMA) that is not BIGINT,
# for the runs a reader takes from the state (`_runs_not_exported`), without pyarrow.
_RUN_TYPES = {
    "run_id": "VARCHAR",
    "outcome": "VARCHAR",
    "error": "VARCHAR",
    "started_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ",
    "coverage_hour": "DOUBLE",
    "coverage_day": "DOUBLE",
    "oldest_lag_seconds": "DOUBLE",
    "achieved_rps": "DOUBLE",
    "configured_rps": "DOUBLE",
}


def _runs_not_exported(data_dir: Path, exported: Source) -> str | None:
    """The `sync_runs` relation while a run is `running` in the state: `sync_runs.parquet` is
    written at the end of a run, so it lacks a run in progress and one killed with kill -9
    (until the next sync records it). Those runs are added from the state, settled as `status`,
    `check` and the metrics settle them (`settled_runs`: `killed` once the process the lock
    file names is gone). SQL text (no pyarrow: `opsaudit query` stays fast); None otherwise."""
    state = _open_state(data_dir)
    if state is None:
        return None
    try:
        if not state.has_running_run():
            return None
        runs = settled_runs(state.runs_rows(), data_dir / LOCK_FILE)
    finally:
        state.close()
    unrecorded = [r for r in runs if r.finished_at is None]  # running in the state
    if not unrecorded:  # it ended between the two reads: the file has it, or will
        return None
    rows = ", ".join(
        "(" + ", ".join(_run_value(name, getattr(r, name)) for name in r._fields) + ")"
        for r in unrecorded
    )
    added = f"SELECT * FROM (VALUES {rows}) AS t({', '.join(RunRow._fields)})"
    if not exported or not isinstance(exported, list):
        return f"({added})"
    ids = ", ".join(_run_value("run_id", r.run_id) for r in unrecorded)
    return (
        f"(SELECT * FROM read_parquet({_run_value('run_id', exported[0])}) "
        f"WHERE run_id NOT IN ({ids}) UNION ALL BY NAME {added})"
    )


def _run_value(name: str, value: object) -> str:
    """A typed SQL literal of column `name` (`_RUN_TYPES`)."""
    kind = _RUN_TYPES.get(name, "BIGINT")
    if value is None:
        return f"CAST(NULL AS {kind})"
    if kind == "TIMESTAMPTZ":
        return f"make_timestamptz({int(value)})"  # type: ignore[call-overload]
    if kind == "VARCHAR":
        return "'" + str(value).replace("'", "''") + "'"
    return f"CAST({value!r} AS {kind})"


def local_sources(data_dir: Path, relative: bool = False) -> dict[str, Source]:
    """Each source's file paths ([] when it has none yet): absolute, or relative to `data_dir`
    (the views database, which must keep working after the directory is copied or moved)."""
    base = Path() if relative else data_dir
    out: dict[str, Source] = {}
    committed = _committed(data_dir)
    if committed is None:
        versions = sorted(p.relative_to(data_dir).as_posix() for p in data_dir.glob(VERSIONS_GLOB))
        superseded = summary = flagged = None
    else:
        versions, superseded, summary, flagged = committed
    out[VERSIONS_GLOB] = [(base / f).as_posix() for f in versions]
    out[SUPERSEDED_GLOB] = (
        None if superseded is None else [(base / f).as_posix() for f in superseded]
    )
    out[SUMMARY_GLOB] = None if summary is None else [(base / f).as_posix() for f in summary]
    # The summary's total over exactly these files, where one was written for them.
    total = None if summary is None else summary_total_file(summary)
    out[SUMMARY_TOTAL_GLOB] = (
        [(base / total).as_posix()] if total and (data_dir / total).is_file() else None
    )
    out[FLAGGED_GLOB] = None if flagged is None else [(base / f).as_posix() for f in flagged]
    for source in SOURCES:  # the single-file tables: projects, sync_runs, the names tables
        if source not in out:
            out[source] = [(base / source).as_posix()] if (data_dir / source).is_file() else []
    return out


def readable_parts(data_dir: Path) -> tuple[list[Path], list[Path]]:
    """The directories and files DuckDB must be allowed to read for dataset `data_dir`, resolved:
    DuckDB checks a file's real path, so a table's folder (or a partition, or a file) moved to
    another disk and linked back is allowed where it really is (issue 19). Only what the views
    read is followed (the tables' folders, their partitions and files); a link elsewhere in the
    data directory allows nothing."""
    directories = [data_dir.resolve()]
    files: list[Path] = []

    def allow(path: str, is_dir: bool) -> bool:
        """Allow `path`'s real location unless it is already; False if it cannot be read."""
        try:
            real = Path(path).resolve(strict=True)
        except (OSError, RuntimeError):  # gone, or a link loop: nothing to read there
            return False
        if not any(real.is_relative_to(d) for d in directories):
            (directories if is_dir else files).append(real)
        return True

    def walk(folder: str, depth: int) -> None:
        # Only links can lead outside: an entry that is not one lies where its folder really is.
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            is_dir = entry.is_dir()
            if entry.is_symlink() and not allow(entry.path, is_dir):
                continue
            if is_dir and depth < 1:  # operation_versions/created_month=.../part-*.parquet
                walk(entry.path, depth + 1)

    for source in SOURCES:
        table = data_dir / Path(source).parts[0]
        if table.is_symlink() and not allow(str(table), True):
            continue
        walk(str(table), 0)
    return directories, files


class DamagedFileError(StorageError):
    """A data file of a local dataset is not Parquet (exit 6): opsaudit writes each file aside
    and renames it into place whole, so something else wrote or cut it."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} Fix: {fix}")
        self.problem = problem  # what doctor's finding says, its remedy `fix`
        self.fix = fix


def damaged_file(data_dir: Path, relative: str, said: str) -> DamagedFileError:
    """The error of file `relative` (to `data_dir`), which is not Parquet (`said`: why), with
    what to do about it: its table's, as the lake's `DamagedTableError` says it."""
    table = Path(relative).parts[0]
    # A names table's damaged file is written again by the next sync too: `Dataset.recover`.
    if table in FROM_STATE_FILES:
        fix = (
            f"run `opsaudit sync`: {table} holds nothing the state does not, the next sync "
            "writes the file again"
        )
    elif table == SUMMARY_TOTAL_DIR:
        fix = (
            f"delete {relative}: it sums the summary's files, which the report reads without "
            "it; the next sync writes it again"
        )
    else:
        fix = f"restore {relative} from a backup; opsaudit cannot rebuild {table}"
    return DamagedFileError(
        f"{data_dir}: table {table} cannot be read: its file {relative} is not a Parquet file "
        f"({said}); opsaudit writes each file whole, so something else wrote or cut it.",
        fix,
    )


def unreadable(path: Path) -> str | None:
    """Why `path` is not a Parquet file (pyarrow's first line), None when its footer reads:
    the footer alone, never the rows (doctor stays fast on 10M operations). A file that is not
    there is None: what is not there is not read."""
    import pyarrow.parquet as pq  # on a check or an error path alone (readers' start-up)

    try:
        pq.read_metadata(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        # Its first sentence: "Parquet magic bytes not found in footer. Either the file ..."
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
    return None


def damaged_files(data_dir: Path, live: Iterable[str]) -> list[DamagedFileError]:
    """The errors of the files readers read that are not Parquet: the committed files `live`
    (the state's), the single-file tables and the summary's total (`local_sources`)."""
    relatives = list(live)
    for source, files in local_sources(data_dir, relative=True).items():
        if source not in (VERSIONS_GLOB, SUPERSEDED_GLOB, SUMMARY_GLOB, FLAGGED_GLOB):
            relatives += files or []
    out = []
    for relative in dict.fromkeys(relatives):
        said = unreadable(data_dir / relative)
        if said is not None:
            out.append(damaged_file(data_dir, relative, said))
    return out


# How DuckDB names a file that is not Parquet (1.4: "File '...' too small to be a Parquet
# file", "No magic bytes found at end of file '...'", and whatever a damaged footer says).
_QUOTED_FILE = re.compile(r"'([^']+\.parquet)'")


def damaged_in(message: str, data_dirs: Iterable[Path]) -> DamagedFileError | None:
    """The error of the file of a dataset in `data_dirs` that a DuckDB error `message` names,
    when that file is not Parquet (its footer read again: on the error path alone); None for
    any other error."""
    roots = {d.resolve() for d in data_dirs}
    for match in _QUOTED_FILE.finditer(message):
        path = Path(match[1])
        # A table's file lies in its folder, or in a partition of it (operation_versions), of a
        # data directory read: a user's own file in a folder named `projects` is not the
        # dataset's (no sync writes it), its error is the query's.
        root = next(
            (
                p.parent
                for p in path.parents[:2]
                if p.name in _TABLE_DIRS and p.parent.resolve() in roots
            ),
            None,
        )
        if root is None:
            continue
        said = unreadable(path)
        if said is not None:
            return damaged_file(root, path.relative_to(root).as_posix(), said)
    return None


_TABLE_DIRS = frozenset(Path(source).parts[0] for source in SOURCES)


__all__ = [
    "DamagedFileError",
    "LocalReader",
    "committed_files",
    "committed_summary",
    "damaged_files",
    "damaged_in",
    "local_sources",
    "readable_parts",
]
