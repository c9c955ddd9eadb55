"""Where `opsaudit query` writes rows as they come (json, jsonl, csv): stdout, or `-o FILE`
whole or not at all (`core.output.OutputFile`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exporter.cli._common import emit
from exporter.cli._stdout import reader_gone
from exporter.core.errors import ConfigError, QueryError
from exporter.core.output import OutputFile


class RowsOutput:
    """stdout (each piece written and flushed as it comes), or -o FILE."""

    def __init__(self, output: Path | None) -> None:
        self.output = output
        self._file = None if output is None else OutputFile(output)
        self._written = False  # on stdout: then the rows cannot be written again

    def write(self, piece: str) -> None:
        if self._file is None:
            self._written = True  # (first: a write that failed part way passed some on)
            emit(piece, None)
            return
        try:
            self._file.write(piece.encode("utf-8"))
        except OSError as exc:
            raise self._cannot_write(exc) from None

    @property
    def printed(self) -> bool:
        """Rows reached stdout (where they cannot be taken back)."""
        return self._file is None and self._written

    def rewind(self) -> bool:
        """Ready to write the rows again from the first (they are read again): False when
        some have reached a reader already (stdout, a FIFO), which would see them twice."""
        if self._file is None:
            return not self._written
        try:
            return self._file.rewind()
        except OSError as exc:
            raise self._cannot_write(exc) from None

    def close(self) -> None:
        """Every row written: -o FILE put in place (an empty result too: an empty file)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                raise self._cannot_write(exc) from None

    def discard(self) -> None:
        """The query failed: -o FILE is not replaced (the previous one stays whole)."""
        if self._file is not None:
            self._file.discard()

    def _cannot_write(self, exc: OSError) -> ConfigError:
        # As `emit`: exit 2, the previous file whole.
        return ConfigError(f"cannot write -o {self.output}: {exc.strerror or exc}")


def write_rows(
    output: Path | None,
    read: Callable[[Callable[[Any], None], Callable[[], bool]], None],
    sql: str,
    params: Any,
    fmt: str,
) -> None:
    """json, jsonl, csv: each batch of rows written as it is read, so memory holds a batch.
    `read(run, rewind)` runs `run(con)` (again on a new connection when a sync deleted a file
    the first one named, after `rewind()`: `_query._read`)."""
    steady_heap()
    out = RowsOutput(output)

    def run(con: Any) -> None:
        from exporter.analytics.stream import render_batches
        from exporter.analytics.views import execute_batches

        columns, batches = execute_batches(con, sql, params)
        for piece in render_batches(columns, batches, fmt):
            out.write(piece)

    try:
        read(run, out.rewind)
        out.close()
    except BrokenPipeError:
        out.discard()
        reader_gone()
    except QueryError as exc:
        out.discard()
        if not out.printed:
            raise
        # DuckDB failed part way (a cast, `error()`): what reached stdout stays there; the
        # error says it is not the whole result, so exit 7 is not read as "nothing printed".
        raise QueryError(
            f"{exc}\n(the rows printed before this error are not the whole result: the query "
            "failed part way)"
        ) from exc
    except BaseException:
        out.discard()
        raise


# glibc's mallopt parameters.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def steady_heap() -> None:
    """Rows written batch after batch allocate and free the same memory again and again:
    glibc gave the free top of the heap back to the kernel each time (past 128 KiB) and
    served a batch's large strings from fresh mappings, so each batch faulted its pages in
    anew (3M rows as jsonl: 16 s of system time of 80 s of CPU). Kept instead: the peak is the
    same (it is what a batch needs), the faults are gone."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # (glibc's largest)
    except (OSError, AttributeError):  # another C library (musl): its own policy
        pass
