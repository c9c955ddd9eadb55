"""The exception tree of opsaudit and the exit code each error maps to.

Every layer raises subclasses of `OpsauditError`; the CLI turns them into messages and exit
codes. No message ever contains the API key.
"""

from __future__ import annotations

import base64
import enum
import errno
import os
import re
import threading
from collections.abc import Callable
from urllib.parse import quote, quote_plus


class ExitCode(enum.IntEnum):
    """Process exit codes, documented in the README (cron monitors them)."""

    OK = 0
    PARTIAL = 1  # some projects failed; the rest were committed
    USAGE = 2  # bad flags or configuration (click's convention)
    AUTH = 3  # missing, invalid or revoked API key
    LOCKED = 4  # another sync holds the data directory
    FATAL = 5  # nothing could be synced: API unreachable, discovery failed, unexpected error
    STATE = 6  # corrupt, foreign or newer-version state or data
    SQL = 7  # a query failed (bad SQL, unknown table, ...)
    ATTENTION = 8  # `check` or `doctor` found something to fix (one line per finding)
    INCOMPLETE = 9  # `query` wrote rows, then could not read the rest: its output is cut
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + its number, the shell's convention
    PIPE_CLOSED = 141  # the reader closed stdout (`| head`): 128 + SIGPIPE, as `cat` ends
    TERMINATED = 143  # `sync` stopped by SIGTERM (systemctl stop): 128 + 15


class OpsauditError(Exception):
    """Base of every error opsaudit raises on purpose."""

    exit_code: ExitCode = ExitCode.FATAL


class ConfigError(OpsauditError):
    """Bad configuration: a missing key, a malformed URL, an unusable data directory."""

    exit_code = ExitCode.USAGE


def missing_data_dir(data_dir: object) -> ConfigError:
    """The error of every reader given a `--data-dir` that does not exist (readers never create
    one: a mistyped path would otherwise answer every question with nothing), or is a file
    (as the command line says it: the library said "does not exist"), or no sync could create
    (`pathcheck`: a file on its path, a symlink loop, ...)."""
    if isinstance(data_dir, (str, os.PathLike)):
        from exporter.core.pathcheck import data_dir_problem

        problem = data_dir_problem(data_dir)
        if problem is not None:
            return ConfigError(f"--data-dir {problem}")
    return ConfigError(
        f"--data-dir {data_dir} does not exist; run `opsaudit sync --data-dir {data_dir}` first, "
        "or point --data-dir (or $OPSAUDIT_DATA_DIR) at an existing dataset"
    )


def check_type(
    name: str,
    value: object,
    kinds: type | tuple[type, ...],
    expected: str,
    *,
    but: tuple[type, ...] = (),
    error: Callable[[str], Exception] = ConfigError,
) -> None:
    """A library caller's value of the wrong type, refused where it is given: it raised a bare
    TypeError or AttributeError deep inside (a sync's after its run was recorded). `error`
    (ConfigError; the report's ValueError) says `name`, the type given (`but`: types refused
    though among `kinds`, a str for a list) and `expected`, never the value: an API key given
    as bytes, a URL holding credentials."""
    if isinstance(value, kinds) and not isinstance(value, but):
        return
    given = "None" if value is None else type(value).__name__
    raise error(f"{name} is {given}, not {expected}")


def check_types(
    *checks: tuple[str, object, type | tuple[type, ...], str],
    but: tuple[type, ...] = (),
    error: Callable[[str], Exception] = ConfigError,
) -> None:
    """`check_type` of each (name, value, kinds, expected), in order."""
    for name, value, kinds, expected in checks:
        check_type(name, value, kinds, expected, but=but, error=error)


class KeyFileError(ConfigError):
    """An --api-key-file that cannot be read, its problem and fix apart (doctor's columns)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}: {fix}")
        self.problem, self.fix = problem, fix


# An API key's shape: a long token of letters and digits (no path separator, no extension).
_KEY_LIKE = re.compile(r"[A-Za-z0-9_-]{32,}")


def unreadable_key_file(path: os.PathLike[str], exc: OSError) -> ConfigError:
    """The error for an --api-key-file `exc` says cannot be read. A missing "file" that is the
    key itself (`--api-key-file "$NEON_API_KEY"`) is not echoed into cron's mail and the log."""
    given = os.fspath(path).strip()
    if isinstance(exc, FileNotFoundError) and (
        given == os.environ.get("NEON_API_KEY", "").strip()
        or (
            _KEY_LIKE.fullmatch(given)
            and any(c.isdigit() for c in given)
            and any(c.isalpha() for c in given)
        )
    ):
        return KeyFileError(
            "--api-key-file: no such file, and what was given looks like an API key, not a "
            "file's path (not shown)",
            "write the key to a file and give that file's path, or set NEON_API_KEY",
        )
    return ConfigError(f"cannot read --api-key-file {os.fspath(path)}: {exc.strerror}")


class ApiError(OpsauditError):
    """The management API could not be used as expected."""

    def __init__(self, message: str, *, status: int | None = None, request_id: str | None = None):
        if request_id:
            message = f"{message} (request id {request_id})"
        super().__init__(message)
        self.status = status
        self.request_id = request_id


class AuthError(ApiError):
    """The API answered 401: the key is missing, invalid or revoked."""

    exit_code = ExitCode.AUTH


class NotFoundError(ApiError):
    """The API answered 404 for a project or an operation."""


class UnknownProjectError(NotFoundError):
    """404 for a project no listing ever showed and no walk ever completed: a mistyped
    `--project` (a project error, exit 1), never taken for a deleted project."""


class ScopeError(ApiError):
    """The API refused a listing for a scope reason (e.g. 400 org_id is required)."""


class TransientError(ApiError):
    """A retryable failure that kept failing: 429, 5xx, dropped connection, malformed body."""


class ApiUnavailableError(ApiError):
    """Every request keeps failing, across projects, with no success: the run stops early."""


class StorageError(OpsauditError):
    """The data directory or the state database cannot be used safely."""

    exit_code = ExitCode.STATE


class NoDatasetError(StorageError):
    """No dataset at an object-storage location yet (nothing synced there): `check` reports it
    as it does an empty local directory, a finding (exit 8), not a storage error."""


class UnreadableStateError(StorageError):
    """The state file is corrupt or not an opsaudit state (not: a newer format, a full disk)."""


class AccessDeniedError(StorageError):
    """A file this user may not read or write (of the dataset, mostly): no bug, and no
    corruption (moving the state away would start a new dataset)."""

    def __init__(self, path: object) -> None:
        super().__init__(
            f"permission denied: {path}: run as the user that owns it, or give this one access"
        )


# The advice for an OSError writing the data directory, by its errno (else: its text alone).
_OS_ADVICE = {
    errno.ENOSPC: "free some space, then run again",
    errno.EDQUOT: "free some space or raise the quota, then run again",
    errno.EROFS: (
        "sync, compact and discard-events need a writable directory (query, report, status "
        "and check only read it): mount it read-write, or choose another --data-dir"
    ),
}


def os_storage_error(path: os.PathLike[str], exc: OSError, doing: str) -> StorageError:
    """The error for `exc`, raised while `doing` ("cannot write to data directory") at `path`,
    with the fix its errno calls for: a permission is every command's one "permission denied"
    (it was told "free some space or fix the mount" by the state file, other words by the
    sync's probe). Names `path` or the directory above it that was refused, never a temporary
    sibling."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        refused = os.path.normpath(os.fspath(path))
        if exc.filename is not None:
            named = os.path.normpath(os.fsdecode(exc.filename))
            if refused == named or refused.startswith(named.rstrip(os.sep) + os.sep):
                refused = named
        return AccessDeniedError(refused)
    advice = _OS_ADVICE.get(exc.errno or 0)
    return StorageError(f"{doing} {path}: {exc.strerror}" + (f"; {advice}" if advice else ""))


class LockHeldError(OpsauditError):
    """Another sync holds the data directory's lock."""

    exit_code = ExitCode.LOCKED


class StoppedError(OpsauditError):
    """A sync's stop (Ctrl-C, SIGTERM: `sync(stop=...)`) set while it waited for the lock or
    the lease (`wait_for_lock`, `--wait`): nothing was read or written."""

    exit_code = ExitCode.INTERRUPTED

    @classmethod
    def waiting(cls, what: str) -> StoppedError:
        """Stopped while waiting for `what` (the lock FILE, the lease on URL)."""
        return cls(
            f"stopped while waiting for {what} (another opsaudit sync holds it): nothing was "
            "read or written; the next run syncs"
        )


class QueryError(OpsauditError):
    """A SQL query failed."""

    exit_code = ExitCode.SQL


class IncompleteOutputError(OpsauditError):
    """`opsaudit query` had written rows where they cannot be taken back (stdout, a FIFO) when
    a file it read was deleted: reading again would write them twice, so it stops."""

    exit_code = ExitCode.INCOMPLETE


class ReadOnlyError(QueryError):
    """`opsaudit query` refused a statement that is not a reading one (COPY, CREATE, SET, ...)."""

    exit_code = ExitCode.USAGE


# -- redaction ---------------------------------------------------------------------------------
# Text that came from the server (error bodies, messages) may echo the Authorization header.
# Everything that is logged, printed or stored passes through `redact` first (PRODUCT.md:
# secret-safe). The key itself is registered by the client that holds it.

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_LOWER_HEX = re.compile(r"%[0-9A-F]{2}")  # %2F as %2f: servers write either
_BEARER = re.compile(r"(?i)\b(bearer)(\s+|%20|\+)[^\s\"',;&]+")
REDACTED = "[REDACTED]"


def register_secret(secret: str) -> None:
    """Redact `secret` from every text passed to `redact` in this process, as written and as a
    server may quote it: percent-encoded, or in base64 (a Basic header of "user:key")."""
    if secret:
        with _SECRETS_LOCK:
            _SECRETS.update(_written_forms(secret))


def _written_forms(secret: str) -> set[str]:
    """`secret` and its encoded forms. In a longer base64 text the secret's bytes may begin at
    any of three alignments: each alignment's characters made of the secret's bytes alone (its
    core) are the same whatever comes before or after, so the core is what is redacted."""
    forms = {secret}
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        forms |= {encoded, _LOWER_HEX.sub(lambda m: m[0].lower(), encoded)}
    raw = secret.encode()
    for skip in range(3):  # bytes of other text before the secret's first byte
        whole = base64.b64encode(bytes(skip) + raw).decode()
        core = whole[-(-skip * 8 // 6) : (skip + len(raw)) * 8 // 6]
        forms |= {core, core.replace("+", "-").replace("/", "_")}  # and base64url
    # A core too short to be told from other text is no secret's form (a test key of 3 bytes).
    return {form for form in forms if form == secret or len(form) >= 8}


def redact(text: str) -> str:
    """`text` with every registered secret (any of its forms) and any `Bearer <token>` replaced
    by [REDACTED]."""
    for secret in sorted(_SECRETS, key=len, reverse=True):  # a longer form before its part
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _BEARER.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)


# Control characters (an ESC or BEL in the data or in a server's message: the terminal that
# printed it repainted itself or rang) and bidi overrides (what follows read backwards): shown
# as Python writes them wherever a person reads them; csv, json and -o keep the data as stored.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with each control character and bidi override written as Python writes it."""
    return _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


def redact_url(url: str) -> str:
    """`url` as a message or a help text may print it: without credentials before the host, a
    query string or a fragment (secrets, PRODUCT.md), whether or not the rest parses. The
    userinfo ends at the last "@", as `events.webhook.safe_url` has it: a password may hold a
    "/", "?" or "#" (cut at the first of those, `http://user:Pa/ssW0rd@host` was printed whole)."""
    scheme, sep, rest = url.partition("//")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}".split("?")[0].split("#")[0]
