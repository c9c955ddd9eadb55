"""`sync --log-format json`: stderr carries one JSON object per line, whatever writes to it.

Native code writes to file descriptor 2 past Python's logging: delta-rs' writer, its upload
refused, prints a Rust panic ("thread 'tokio-rt-worker' panicked at ... Already shut down"),
and a log shipper reading one JSON object per line choked on it. While a sync runs, fd 2 is a
pipe; a thread passes each JSON line on to the real stderr as it is and wraps anything else
(the lines of one write together) in a record of the `opsaudit.stderr` logger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

import orjson

LOGGER = "opsaudit.stderr"


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


class _Relay(threading.Thread):
    def __init__(self, source: int, target: int, formatter: logging.Formatter) -> None:
        super().__init__(name="opsaudit-stderr", daemon=True)
        self.source, self.target, self.formatter = source, target, formatter

    def _wrapped(self, lines: list[bytes]) -> bytes:
        text = b"\n".join(lines).decode("utf-8", "replace").strip()
        record = logging.LogRecord(LOGGER, logging.WARNING, __file__, 0, text, None, None)
        return self.formatter.format(record).encode() + b"\n"

    def _pass_on(self, lines: list[bytes]) -> None:
        out: list[bytes] = []
        foreign: list[bytes] = []
        for line in lines:
            if _is_json_object(line):
                if foreign:
                    out.append(self._wrapped(foreign))
                    foreign = []
                out.append(line + b"\n")
            elif line.strip():
                foreign.append(line)
        if foreign:
            out.append(self._wrapped(foreign))
        data = b"".join(out)
        while data:
            data = data[os.write(self.target, data) :]

    def run(self) -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self.source, 65536):
                *lines, pending = (pending + chunk).split(b"\n")
                self._pass_on(lines)
            if pending:
                self._pass_on([pending])
        os.close(self.source)


@contextlib.contextmanager
def json_lines_on_stderr(formatter: logging.Formatter) -> Iterator[None]:
    """fd 2 relayed as JSON lines (`formatter` makes the records) while the block runs."""
    sys.stderr.flush()
    real = os.dup(2)
    source, sink = os.pipe()
    os.dup2(sink, 2)
    os.close(sink)
    relay = _Relay(source, real, formatter)
    relay.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last writer here: the relay reads to its end
        # A child still running (the views database's, the events appender) holds the pipe
        # open: what it writes later is not waited for.
        relay.join(timeout=2.0)
        if not relay.is_alive():
            os.close(real)


__all__ = ["LOGGER", "json_lines_on_stderr"]
