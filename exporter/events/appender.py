"""The events file's appends in a child process (issue 22): an events backfill's JSON built and
written outside the walks' GIL, so the walks do not wait for it (bench/README.md, figure 9).

The follower (`exporter.events.follower`) writes a commit's events, piece by piece (their rows
and names as Arrow IPC), to a scratch file the dataset's recovery empties, and sends its name
over a pipe; the child builds each piece's bytes as the follower would
(`render.event_lines_buffer`), appends them, fsyncs, deletes the scratch file and answers. The
follower marks the events delivered only once the child answered, as after an append of its
own. The parent never waits for the pipe, and the child holds one piece at a time. The child
holds the data directory's lock too (the lock's file descriptor is inherited): a sync killed
during an append leaves the directory locked until that append ended, so no next run repairs
the file's tail while it is written; and each append holds the events file's lock
(`events.eventsfile`), which the runs of another data directory appending to the same file
take too. It has a session of its own (a Ctrl-C at a terminal is the sync's to handle) and
ends when the pipe closes.

    python -m exporter.events.appender PATH
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

__all__ = ["ChildAppender"]

_NAMES = ("_project_name", "_branch_name", "_endpoint_name")


class ChildAppender:
    """The parent's end: start the child, hand it appends, read its answers. Every method
    raises OSError once the child is gone or said it failed."""

    def __init__(self, path: Path, lock_fd: int, scratch: Path):
        # This package importable in the child however the parent found it (a notebook's
        # sys.path, say).
        package_root = str(Path(__file__).resolve().parents[2])
        paths = [package_root, *filter(None, [os.environ.get("PYTHONPATH")])]
        self.scratch = scratch
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exporter.events.appender", str(path)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(lock_fd,),
            start_new_session=True,  # a Ctrl-C at the terminal is the sync's
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._to, self._from = self.proc.stdin, self.proc.stdout

    def append(self, pieces: list[tuple[pa.Table, pa.Array, pa.Array, pa.Array]]) -> None:
        """One append: each piece's rows and, for each row, its three names; answered by
        `ack` once the events are in the file, whole and durable."""
        path = self.scratch / f"events-{uuid.uuid4().hex}.arrows"
        spans: list[tuple[int, int]] = []
        with pa.OSFile(str(path), "wb") as sink:
            for rows, *names in pieces:
                table = rows
                for name, values in zip(_NAMES, names):
                    table = table.append_column(name, values)
                start = sink.tell()
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                spans.append((start, sink.tell() - start))
        try:
            self._to.write(json.dumps({"file": str(path), "pieces": spans}).encode() + b"\n")
            self._to.flush()
        except BrokenPipeError as exc:
            path.unlink(missing_ok=True)
            raise OSError("the events file's appender ended") from exc

    def ack(self) -> None:
        """Until the child answered the last `append`: raises OSError unless its events are
        in the file, whole and durable."""
        answer = self._from.readline()
        if answer != b"ok\n":
            said = answer.decode(errors="replace").strip() or "ended"
            raise OSError(f"the events file's appender: {said}")

    def close(self) -> None:
        """No more appends: the child ends once it read that."""
        for stream in (self._to, self._from):
            with contextlib.suppress(OSError):  # a pipe the child closed
                stream.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main(path: str) -> int:
    """The child: append what the parent hands over until the pipe closes."""
    from exporter.core.layout import appended_whole, write_all
    from exporter.events.eventsfile import locked
    from exporter.events.render import event_lines_buffer

    pa.set_memory_pool(pa.system_memory_pool())  # freed pieces go back to the OS
    stdout = sys.stdout.buffer
    try:
        for line in sys.stdin.buffer:
            append = json.loads(line)
            # Opened for each append, under the file's lock (another data directory's runs
            # may append to it too), its torn tail cut: a path that cannot be opened (a
            # directory, its directory missing) or is not a file is said to the parent like
            # any failure, no traceback on the run's stderr; the end-of-run delivery then
            # meets it too and warns, in one line with the fix, that the events wait.
            with (
                open(append["file"], "rb") as scratch,
                locked(Path(path)) as (fd, _),
                appended_whole(fd),
            ):
                for start, length in append["pieces"]:
                    table = pa.ipc.open_stream(os.pread(scratch.fileno(), length, start)).read_all()
                    names = [table[n].combine_chunks() for n in _NAMES]
                    rows = table.drop_columns(list(_NAMES)).combine_chunks()
                    write_all(fd, event_lines_buffer(rows, *names))
                os.fsync(fd)
            os.unlink(append["file"])
            stdout.write(b"ok\n")
            stdout.flush()
        return 0  # the parent is done (or gone)
    except BaseException as exc:  # said to the parent, which hands the file to the delivery
        _say_failed(stdout, exc)
        return 1


def _say_failed(stdout: BinaryIO, exc: BaseException) -> None:
    """`exc` to the parent (read by `ChildAppender.ack`), if it still listens."""
    try:
        stdout.write(f"failed: {type(exc).__name__}: {exc}\n".encode())
        stdout.flush()
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
