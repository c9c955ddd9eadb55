"""Why a local `--data-dir` can never be a data directory, whatever the command.

Every command asks it before anything runs (`cli._common.DataDir`), the library's readers when
a path is no directory (`errors.missing_data_dir`): a path that no sync could create was told
"does not exist; run `opsaudit sync` first" by the readers (and that sync then failed, exit 6),
and a symlink loop or an over-long name reached the top as an unexpected error (exit 5, "a bug").
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

_FIX = "point --data-dir (or $OPSAUDIT_DATA_DIR) at a directory, or at a path a sync can create"


def data_dir_problem(data_dir: str | os.PathLike[str]) -> str | None:
    """The usage error's text (without "--data-dir ") when `data_dir` can never be a data
    directory, else None. Whether it exists and may be read is each command's own question
    (readers: "does not exist", exit 2; "permission denied", exit 6)."""
    text = os.fspath(data_dir)
    if any(ch < " " or ch == "\x7f" for ch in text):
        # A line break or carriage return read along with the value (a CRLF file, `read`):
        # the sync would create a directory `ls` shows as the name without it.
        return f"{text!r} holds a control character (a line break?); remove it"
    if text.startswith("~") and os.path.expanduser(text) != text:
        # Quoted or from a config file, nobody expands it: a sync made a folder named "~".
        return (
            f"{text}: '~' is not expanded here (a shell expands it only unquoted); write "
            f"{os.path.expanduser(text)}, or ./{text} for a folder named '~'"
        )
    try:
        mode = os.stat(text).st_mode
    except OSError as exc:
        return _unreachable(text, exc.errno)
    return None if stat.S_ISDIR(mode) else f"{_shown(text)} is a file, not a directory"


def plain_path(value: Any) -> Any:
    """A notebook's own path type (an `os.PathLike` that is not a `Path`: py.path, a cloud
    library's) as the `Path` it names; anything else (a bytes path among it) as it is, for the
    caller's type check to take or refuse. Without it such a path raised an AttributeError
    from deep inside a sync, or was refused by the argument checks."""
    if isinstance(value, os.PathLike) and not isinstance(value, Path):
        named = os.fspath(value)
        if isinstance(named, str):
            return Path(named)
    return value


def _unreachable(text: str, code: int | None) -> str | None:
    """The text for a path `os.stat` refused with `code`; None when a sync may still make it
    (missing) or the command says it itself (EACCES: "permission denied", exit 6)."""
    shown = _shown(text)
    if code == errno.ENAMETOOLONG:
        longest = max(Path(text).parts, key=lambda p: len(os.fsencode(p)), default="")
        if len(os.fsencode(longest)) > _limit("PC_NAME_MAX", 255):
            size = len(os.fsencode(longest))
            return f"{shown}: a name in it is {size} bytes, too long; use a shorter one"
        return f"{shown}: the path is {len(os.fsencode(text))} bytes, too long; use a shorter one"
    for prefix in _prefixes(text):
        try:
            mode = os.stat(prefix).st_mode
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return f"{shown}: {prefix} is a symbolic link that loops back on itself; {_FIX}"
            if exc.errno == errno.ENOENT and os.path.islink(prefix):
                target = os.readlink(prefix)
                return (
                    f"{shown}: {prefix} is a symbolic link to {target}, which does not exist; "
                    f"create {target}, or {_FIX}"
                )
            return None  # missing (a sync creates it) or denied (the command says so)
        if not stat.S_ISDIR(mode):
            return f"{shown}: {prefix} is a file, not a directory; {_FIX}"
    return None


def _prefixes(text: str) -> list[str]:
    """`a/b/c` as `a`, `a/b`, `a/b/c` (an absolute path from its first component)."""
    path = Path(text)
    return [str(p) for p in [*reversed(path.parents), path] if p.name]


def _limit(name: str, default: int) -> int:
    try:
        return os.pathconf("/", name)
    except (OSError, ValueError):
        return default


def _shown(text: str) -> str:
    """A path short enough for one line of an error."""
    return text if len(text) <= 200 else f"{text[:60]}...{text[-40:]}"


__all__ = ["data_dir_problem", "plain_path"]
