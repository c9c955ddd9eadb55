"""`-o FILE` written as it is produced (`opsaudit query`'s rows, batch by batch), and yet whole
or not at all, as `layout.replace_output` writes a text it holds whole: into a hidden sibling,
renamed over the file at the end; a failure deletes it and the previous file stays."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import BinaryIO

from exporter.core.layout import fsync_dir

__all__ = ["OutputFile"]


class OutputFile:
    """A file the user named, written in pieces: `write`, then `close` (into place) or
    `discard` (the previous file stays). Special files (a FIFO, `/dev/stdout`, anything under
    /dev or /proc) are written in place, as `replace_output` writes them; so is a file whose
    directory this user may not create a file in (as a shell's `>`). Nothing is opened before
    the first `write` (or `close`): a query that fails leaves even those untouched."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._target = Path(os.path.realpath(path))
        try:
            mode: int | None = os.stat(self._target).st_mode
        except FileNotFoundError:
            mode = None
        special = Path(os.path.abspath(path)).parts[1:2] in (("dev",), ("proc",))
        self._in_place = special or (mode is not None and not stat.S_ISREG(mode))
        self._mode = None if mode is None else stat.S_IMODE(mode)
        self._fh: BinaryIO | None = None
        self._tmp: Path | None = None

    def write(self, data: bytes) -> None:
        if self._fh is None:
            self._fh = self._open()
        self._fh.write(data)

    def rewind(self) -> bool:
        """Forget what was written (the rows are read again); False when it cannot be taken
        back: a FIFO or a device has passed it on."""
        if self._fh is None:
            return True
        if self._in_place:  # (`/dev/stdout` may be a file opened to append to: never cut)
            return False
        self._fh.seek(0)
        self._fh.truncate()
        return True

    def close(self) -> None:
        """The file written: renamed into place (durably), or ended in place."""
        fh = self._fh if self._fh is not None else self._open()
        self._fh = None
        tmp, self._tmp = self._tmp, None
        try:
            fh.flush()
            if tmp is not None:
                os.fsync(fh.fileno())
        finally:
            fh.close()
        if tmp is None:
            return
        try:
            if self._mode is not None:
                os.chmod(tmp, self._mode)
            try:
                os.replace(tmp, self._target)
            except PermissionError:
                if self._mode is None:
                    raise
                # Another's file in a sticky directory: its content replaced in place.
                with open(tmp, "rb") as src, open(self._target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                return
        finally:
            tmp.unlink(missing_ok=True)
        with contextlib.suppress(PermissionError):  # a directory of mode 0333: renamed already
            fsync_dir(self._target.parent)

    def discard(self) -> None:
        """Nothing replaced: the hidden sibling deleted (a file written in place stays cut)."""
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None

    def _open(self) -> BinaryIO:
        if self._in_place:  # appended: `/dev/stdout`'s file keeps what the shell wrote before
            return open(self.path, "ab")
        tmp = self._target.with_name(f".{self._target.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            fh = open(tmp, "wb")  # noqa: SIM115 (kept open across writes, closed in close)
        except PermissionError:
            if self._mode is None:
                raise
            # A directory this user may not create a file in (0555), the file writable.
            return open(self._target, "wb")
        self._tmp = tmp
        return fh
