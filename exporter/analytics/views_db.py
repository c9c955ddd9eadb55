"""Keeping `opsaudit.duckdb` current: rewritten after a run or a compaction when what it names
changed (the committed files, which small tables exist, the .sql files, the loader's code).
When only the files changed (its shape, `_views_shape`, is the one it was written with), only
the definitions that name files are written again (`write_views_database(files_only=True)`).

Written in a short child process unless DuckDB is loaded here already (a notebook, the tests):
the sync never loads DuckDB (its peak memory, PRODUCT.md performance targets), so this module
does not import it; `analytics.views.write_views_database` is what either path runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from exporter.analytics.views_failure import failure
from exporter.core.layout import VIEWS_DB, find_sql_dir
from exporter.store.base import LocalDataset
from exporter.store.local.exports import SNAPSHOT_FILES
from exporter.store.local.reader import local_sources

log = logging.getLogger("opsaudit.storage")

# The state's meta keys holding what the views database was last written from, and its shape.
_VIEWS_KEY = "views_database_key"
_SHAPE_KEY = "views_database_shape"


def _views_key(dataset: LocalDataset) -> str:
    """A digest of everything `opsaudit.duckdb` is made of: the committed files it names, which
    small tables exist, the .sql files and the code that resolves them."""
    h = hashlib.sha256()
    root = dataset.root.resolve()
    h.update(str(root).encode())
    for path in dataset.live_files():
        h.update(b"\0f" + path.encode())
    for relative in SNAPSHOT_FILES.values():
        h.update(b"\0t" + relative.encode() + str((root / relative).is_file()).encode())
    _code_digest(h)
    return h.hexdigest()


def _views_shape(dataset: LocalDataset) -> str:
    """A digest of `opsaudit.duckdb` but for the names of the files: the directory, for each
    source whether it reads files, no file yet (an empty relation) or a derived record, the .sql
    files and the code. Two files of one shape differ only in the definitions that name files,
    and what every other definition reads has the same columns."""
    h = hashlib.sha256()
    root = dataset.root.resolve()
    h.update(str(root).encode())
    for source, files in sorted(local_sources(root, relative=True).items()):
        kind = "derived" if files is None else "files" if files else "none"
        h.update(b"\0s" + source.encode() + b"=" + kind.encode())
    _code_digest(h)
    return h.hexdigest()


def _code_digest(h: hashlib._Hash) -> None:
    sql = find_sql_dir()
    for text in sorted(sql.glob("[0-9][0-9]_*.sql")) if sql else []:
        h.update(b"\0s" + text.name.encode() + text.read_bytes())
    h.update((Path(__file__).resolve().parent / "views.py").read_bytes())


def refresh_views_database(dataset: LocalDataset) -> bool:
    """Rewrite `opsaudit.duckdb` unless it already names exactly what the state says is live.

    Runs in a child process unless DuckDB is already loaded here (a notebook, the tests). Never
    raises: the data is committed; a views database left stale is refreshed by the next run.
    Returns whether it names exactly the live files now.
    """
    key = _views_key(dataset)
    exists = (dataset.root / VIEWS_DB).is_file()
    if exists and dataset.state.get_meta(_VIEWS_KEY) == key:
        return True
    shape = _views_shape(dataset)
    files_only = exists and dataset.state.get_meta(_SHAPE_KEY) == shape
    if not files_only:
        # Forgotten until the new file's is recorded: a file of another shape must never get
        # only its definitions naming files rewritten.
        dataset.state.set_meta(_SHAPE_KEY, "")
    if "duckdb" in sys.modules:
        # Imported here: only when DuckDB is loaded already (the sync itself never loads it,
        # its peak memory), and the analytics layer is optional for the sync.
        try:
            from exporter.analytics.views import write_views_database
        except ImportError:
            return False
        try:
            written = write_views_database(dataset.root, files_only) is not None
        except Exception as exc:
            log.warning("could not refresh opsaudit.duckdb: %s", failure(dataset.root, exc))
            return False
    else:
        handoff = dataset.child_handoff()
        outcome = _write_views_in_child(
            dataset.root, files_only, None if handoff is None else handoff[0]
        )
        if outcome is None:
            return False
        written = outcome
    if not written:
        log.warning("opsaudit.duckdb is open in another program; its views were not refreshed")
        return False
    dataset.state.set_meta(_VIEWS_KEY, key)
    dataset.state.set_meta(_SHAPE_KEY, shape)
    return True


def _write_views_in_child(
    root: Path, files_only: bool = False, lock_fd: int | None = None
) -> bool | None:
    """`write_views_database` in a child process: True written, False held open elsewhere,
    None failed (logged). The child holds the data directory's lock too (`lock_fd` inherited):
    a sync killed while it writes leaves the directory locked until it ended, so the next run's
    child never writes alongside it (the last rename would win, naming an older state's files,
    and the next run's garbage collection may have deleted some of them)."""
    package_parent = str(Path(__file__).resolve().parents[2])  # the folder holding exporter/
    env = {k: v for k, v in os.environ.items() if k != "NEON_API_KEY"}  # it needs no key
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter.analytics.views",
                str(root),
                *(["--files-only"] if files_only else []),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            pass_fds=() if lock_fd is None else (lock_fd,),
        )
    except subprocess.TimeoutExpired as exc:
        log.warning(
            "could not refresh opsaudit.duckdb: writing it took over %d s and was stopped; "
            "the next sync writes it again (`opsaudit doctor` checks the data it reads)",
            exc.timeout,
        )
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not refresh opsaudit.duckdb: %s", failure(root, exc))
        return None
    if done.returncode == 3:
        return False
    if done.returncode < 0:  # killed: by the kernel's OOM killer, mostly
        log.warning(
            "could not refresh opsaudit.duckdb: the process writing it was killed (%s); the "
            "next sync writes it again (if it recurs, give the sync more memory)",
            _signal_name(-done.returncode),
        )
        return None
    if done.returncode != 0:
        # The child's last line is its `failure` (earlier ones: warnings it logged).
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        log.warning("could not refresh opsaudit.duckdb: %s", reason)
        return None
    return True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


__all__ = ["refresh_views_database"]
