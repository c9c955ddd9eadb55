"""A command's text to stdout, and its end when the reader closed stdout (exit 141): one place
for `emit` (`cli._common`) and the rows `opsaudit query` writes as they come (`cli._rows`)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

import click

from exporter.core.errors import ExitCode


def to_stdout(text: str | bytes) -> None:
    """`emit`'s stdout: a reader that closed it ends the command (`reader_gone`), whatever
    prints (`report | true` said "unexpected error (BrokenPipeError)... a bug", exit 5)."""
    # color=True: else click strips each "\x1b[...m" of the data when stdout is no terminal.
    try:
        try:
            click.echo(text, nl=False, color=True)  # encoded whole before any is written
        except UnicodeEncodeError as exc:  # Latin-1 and a cut cell's '\u2026': '?', not a crash
            replaced = exc.object.encode(exc.encoding, "replace").decode(exc.encoding)
            click.echo(replaced, nl=False, color=True)
    except BrokenPipeError:
        reader_gone()


def reader_gone() -> NoReturn:
    """stdout's reader closed it (`opsaudit query ... | head`): it has what it wanted. No
    message and exit 141, as a tool killed by SIGPIPE (`cat`, `seq`) ends; what Python would
    still flush at exit goes to /dev/null (a second "Broken pipe" on stderr otherwise)."""
    with contextlib.suppress(OSError, ValueError):  # (no descriptor: a test runner's stdout)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    raise click.exceptions.Exit(int(ExitCode.PIPE_CLOSED))
