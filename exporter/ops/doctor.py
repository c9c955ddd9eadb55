"""`doctor`: is this set-up able to keep the audit trail? Each finding says what to fix.

It checks, in order: the key (its kind and the organizations it sees; never the key itself),
the base URL and TLS, discovery of the projects (the same code a sync runs), the data directory
(writable, lockable, on a local filesystem), the lock, the state file, the free disk space and
the last runs. Nothing is written to the data directory but a probe file, removed at once; the
API sees a handful of GET requests. A dataset on object storage gets the checks that apply there
(`doctor_lake`, reading only); `run_doctor` alone tells the two apart, and the findings both
say (the state's format, the runs) are written once (`doctor_base`).
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import os
import shutil
import ssl
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter.core.errors import AccessDeniedError, ApiError, AuthError, ConfigError, StorageError
from exporter.core.layout import (
    LOCK_FILE,
    STATE_FILE,
    SUPERSEDED_DIR,
    VERSIONS_DIR,
    VIEWS_DB,
    has_state,
    stateless_data,
)
from exporter.core.model import DEFAULT_BASE_URL
from exporter.ops.doctor_base import (
    DoctorFinding,
    DoctorReport,
    format_found,
    no_state_found,
    runs_found,
)
from exporter.store.local.reader import damaged_files
from exporter.store.state import StateDB, settled_runs

__all__ = ["DoctorFinding", "DoctorReport", "run_doctor"]

UTC = dt.timezone.utc
LOW_DISK = 1 << 30  # 1 GiB: a warning (a backfill of millions of operations takes hundreds of MB)
NO_DISK = 100 << 20  # 100 MiB: an error
# flock on these is unreliable or missing (the lock would not stop a second sync).
NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "fuse.sshfs", "afs", "ceph"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def run_doctor(
    data_dir: Path | str,
    *,
    api_key: str | None,
    base_url: str,
    key_error: str | None = None,
    key_fix: str | None = None,
    storage_options: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> DoctorReport:
    """Run every check; never raises for what it finds (each problem is a finding).

    `key_error`: the key could not even be read (an unreadable --api-key-file): said as the
    key's finding (with `key_fix`, else "make the key file readable"), and the API is not
    asked. `data_dir` on object storage (s3://, gs://, az://,
    with `storage_options`) is checked by `doctor_lake`, reading only. A ConfigError (exit 2)
    for a --data-dir or --storage-option that names no data directory.
    """
    from exporter.store.readers import local_path, location

    loc = location(data_dir, storage_options)  # the one place that tells local from lake
    report = DoctorReport()
    _check_api(report, api_key, base_url, key_error, key_fix)
    now = now or dt.datetime.now(UTC)
    if loc.is_local:
        _check_data_dir(report, Path(local_path(data_dir, loc)), now)
    else:
        from exporter.ops.doctor_lake import check_lake  # deltalake, obstore: object storage

        check_lake(report, loc, now)
    return report


# -- the key, the URL, TLS, discovery -------------------------------------------------------


def _check_api(
    report: DoctorReport,
    api_key: str | None,
    base_url: str,
    key_error: str | None,
    key_fix: str | None = None,
) -> None:
    from exporter.api.client import (  # only when doctor calls the API
        check_api_key,
        validate_base_url,
    )

    try:
        base_url = validate_base_url(base_url)
    except ConfigError as exc:
        report.add("base_url", "error", str(exc), "pass --base-url (or $OPSAUDIT_BASE_URL)")
        return
    parts = urlsplit(base_url)
    if parts.scheme == "https":
        report.add("base_url", "ok", base_url)
    elif (parts.hostname or "") in _LOOPBACK:
        report.add("base_url", "ok", f"{base_url} (plain http on loopback)")
    else:
        report.add(
            "base_url",
            "warn",
            f"{base_url} is plain http: the key crosses the network unencrypted",
            "use the https:// address of the API",
        )
    if key_error is not None:
        report.add("key", "error", key_error, key_fix or "make the key file readable by this user")
        return
    try:
        key = check_api_key(api_key)
    except AuthError as exc:
        # "no API key: set NEON_API_KEY or ...": what is wrong, then the fix, said once each.
        problem, _, fix = str(exc).partition(": ")
        report.add("key", "error", problem, fix or None)
        return
    if not _probe(report, base_url, key):
        return
    _discovery(report, base_url, key)


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


# Answers that say nothing about the key: the service (or a gateway) failed this once. Retried a
# few times; if they persist they are reported as what they are, never as advice about the key
# (issue 19: one 500 told a personal key to "use a personal or organization key").
TRANSIENT_STATUSES = frozenset({408, 423, 425, 429, 500, 502, 503, 504})
PROBE_ATTEMPTS = 3
PROBE_PAUSE_S = 0.5


def _get(http: Any, path: str, **kwargs: Any) -> Any:
    """GET with a retry of transient answers (PROBE_ATTEMPTS in all, short pauses); the last
    answer. Connection errors are raised: they are named by _connection_finding."""
    import time

    for attempt in range(PROBE_ATTEMPTS):
        answer = http.get(path, **kwargs)
        if answer.status_code not in TRANSIENT_STATUSES or attempt == PROBE_ATTEMPTS - 1:
            return answer
        time.sleep(PROBE_PAUSE_S * (attempt + 1))
    raise AssertionError("unreachable")


def _transient_finding(report: DoctorReport, path: str, status: int) -> None:
    report.add(
        "api",
        "error",
        f"GET /{path} answered {status} {PROBE_ATTEMPTS} times: a transient failure of the "
        "service or a proxy, not a problem of the key",
        "run `opsaudit doctor` again in a few minutes; if it persists, check the platform's "
        "status page or the proxy",
    )


def _probe(report: DoctorReport, base_url: str, key: str) -> bool:
    """One request by hand (so a TLS or DNS failure is named as such), then the key's kind."""
    import httpx

    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=15, trust_env=False) as http:
        try:
            orgs = _get(http, "users/me/organizations")
        except httpx.HTTPError as exc:
            _connection_finding(report, base_url, exc)
            return False
        if urlsplit(base_url).scheme == "https":
            report.add("tls", "ok", "certificate verified")
        if orgs.status_code == 401:
            report.add(
                "key",
                "error",
                "the key was rejected (401: invalid, revoked or expired)",
                "create a new key in the console and update NEON_API_KEY or --api-key-file",
            )
            return False
        if orgs.status_code in TRANSIENT_STATUSES:
            _transient_finding(report, "users/me/organizations", orgs.status_code)
            return False
        if orgs.status_code == 200:
            listed = _organizations(orgs)
            if listed is None:
                # Another server (a web page, a proxy's) answering 200 to any path: not "ok
                # key", then a discovery failure with advice about organizations.
                report.add(
                    "base_url",
                    "error",
                    f"{base_url} answered GET users/me/organizations with 200 but not the "
                    f"management API's JSON ({orgs.headers.get('content-type') or 'no type'}): "
                    "it is not the platform's API",
                    f"pass the API's address as --base-url (the default: {DEFAULT_BASE_URL})",
                )
                return False
            names = ", ".join(
                f"{o.get('name')} ({o.get('id')})" for o in listed if isinstance(o, dict)
            )
            report.add(
                "key",
                "ok",
                f"a personal key; it sees {len(listed)} organization(s)"
                + (f": {names}" if names else ""),
            )
            return True
        # Organization and project-scoped keys cannot list a user's organizations (403).
        try:
            projects = _get(http, "projects", params={"limit": 100})
        except httpx.HTTPError as exc:
            _connection_finding(report, base_url, exc)
            return False
        if projects.status_code in TRANSIENT_STATUSES:
            _transient_finding(report, "projects", projects.status_code)
            return False
        if projects.status_code == orgs.status_code == 404:
            # The API answers both for any key (401/403 otherwise): not the API, or its root
            # without the API's path.
            report.add(
                "base_url",
                "error",
                f"{base_url} answers 404 to the organizations and projects listings: it is "
                "not the management API",
                "use its URL, ending in /api/v2 (https://console.neon.tech/api/v2/)",
            )
            return False
        if projects.status_code != 200:
            report.add(
                "key",
                "error",
                f"the key cannot list organizations ({orgs.status_code}) nor projects "
                f"({projects.status_code})",
                "use a personal or organization key, or sync with --project ID",
            )
            return False
        try:
            body = projects.json()
        except ValueError:
            body = {}
        listed = [p for p in body.get("projects") or [] if isinstance(p, dict)]
        orgs_seen = sorted({str(p["org_id"]) for p in listed if p.get("org_id")})
        in_org = f" in organization {', '.join(orgs_seen)}" if orgs_seen else ""
        if len(listed) == 1:
            kind = "a project-scoped key (or an organization key of a one-project organization)"
        else:
            kind = "an organization key"
        count = f"{len(listed)}{'+' if len(listed) == 100 else ''}"
        report.add("key", "ok", f"{kind}; it sees {count} project(s){in_org}")
        return True


def _organizations(answer: Any) -> list[Any] | None:
    """The organizations of a 200 answer to users/me/organizations; None when the body is not
    a JSON object at all (the answer of some other server: a web page). A JSON object without
    the list reads as none: the API itself rarely answers 200 without its key (PRODUCT.md; a
    sync retries it), which says nothing about the URL."""
    try:
        body = answer.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    listed = body.get("organizations")
    return listed if isinstance(listed, list) else []


def _connection_finding(report: DoctorReport, base_url: str, exc: BaseException) -> None:
    import httpx

    chain = _cause_chain(exc)
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        report.add(
            "tls",
            "error",
            f"the certificate of {urlsplit(base_url).hostname} could not be verified ({exc})",
            "fix the system's CA certificates, or the TLS-intercepting proxy in between",
        )
    elif any(isinstance(e, ssl.SSLError) for e in chain):
        report.add("tls", "error", f"TLS handshake failed ({exc})", "check --base-url's scheme")
    elif isinstance(exc, httpx.TimeoutException):
        report.add("base_url", "error", f"{base_url} did not answer in 15 s", "check the network")
    else:
        report.add(
            "base_url",
            "error",
            f"cannot connect to {base_url} ({type(exc).__name__}: {exc})",
            "check --base-url, DNS and the network (firewall, proxy)",
        )


def _discovery(report: DoctorReport, base_url: str, key: str) -> None:
    from exporter.api.client import (  # only when doctor calls the API
        ApiClient,
        RetryPolicy,
        clock_skew_problem,
    )
    from exporter.api.discovery import discover  # only when doctor calls the API

    try:
        with ApiClient(base_url, key, retry=RetryPolicy(max_attempts=2)) as client:
            found = discover(client)
    except ApiError as exc:
        report.add(
            "discovery",
            "error",
            f"listing the projects failed: {exc}",
            "pass --org-id ID (the organization's settings page shows it) or --project ID",
        )
        return
    # Errors, not warnings: either makes a sync miss operations or projects while it exits 0
    # or 1, and `doctor && ...` must not pass such a set-up.
    skewed = clock_skew_problem(client.clock_skew)
    if skewed is not None:
        report.add(
            "clock", "error", skewed, "set this host's clock (NTP: timedatectl set-ntp true)"
        )
    errors = getattr(found, "errors", [])
    message = f"{len(found.scope_of)} project(s) in scope"
    if errors:
        report.add(
            "discovery",
            "error",
            f"{message}, but some listings failed: {'; '.join(errors)}",
            "a sync would be partial (exit 1): check the key's access",
        )
    else:
        report.add("discovery", "ok", message)


# -- the data directory, the lock, the state, the disk, the runs ---------------------------------


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _filesystem(path: Path) -> str | None:
    """The type of the filesystem holding `path` (from /proc/self/mounts), when known."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def _check_data_dir(report: DoctorReport, data_dir: Path, now: dt.datetime) -> None:

    where = _nearest_existing(data_dir)
    if not data_dir.exists():
        if not where.is_dir():
            report.add(
                "data_dir",
                "error",
                f"{data_dir} cannot be created: {where} is not a directory",
                "point --data-dir (or $OPSAUDIT_DATA_DIR) at a directory path",
            )
            return
        usable = _probe_directory(report, where, f"{data_dir} does not exist yet and ")
        if usable:
            report.add(
                "data_dir", "ok", f"{data_dir} does not exist yet; the first sync creates it"
            )
        _check_disk(report, where)
        return
    if not data_dir.is_dir():
        report.add(
            "data_dir",
            "error",
            f"{data_dir} is not a directory",
            "point --data-dir (or $OPSAUDIT_DATA_DIR) at a directory",
        )
        return
    try:
        os.listdir(data_dir)
    except PermissionError:
        # Nothing in it can be checked (its lock, state and views alike).
        report.add("data_dir", "error", str(AccessDeniedError(data_dir)))
        return
    if _probe_directory(report, data_dir, f"{data_dir} "):
        report.add("data_dir", "ok", f"{data_dir} is writable and locks work")
    kind = _filesystem(data_dir)
    if kind in NETWORK_FILESYSTEMS:
        report.add(
            "data_dir",
            "warn",
            f"{data_dir} is on a network filesystem ({kind}): the lock that keeps two syncs "
            "apart may not hold",
            "put the data directory on a local disk",
        )
    _check_lock(report, data_dir / LOCK_FILE)
    _check_disk(report, data_dir)
    live = _check_state(report, data_dir / STATE_FILE, now)
    if _check_files(report, data_dir, live):
        # Not the views as well: they cannot answer over a damaged file, and their fix ("run
        # sync (it rewrites the file); meanwhile use `opsaudit query`") contradicted the files'.
        _check_views(report, data_dir, live)


def _probe_directory(report: DoctorReport, directory: Path, subject: str) -> bool:
    """Create, fsync, lock and remove a probe file in `directory`."""
    probe = directory / f".opsaudit-doctor-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        report.add(
            "data_dir",
            "error",
            f"{subject}is not writable ({exc.strerror})",
            "make it writable by this user (or mount it read-write), or choose another --data-dir",
        )
        return False
    try:
        os.write(fd, b"opsaudit doctor\n")
        os.fsync(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                report.add(
                    "lock",
                    "error",
                    f"file locks do not work in {directory} ({exc.strerror})",
                    "put the data directory on a local filesystem (not NFS or SMB)",
                )
                return False
            raise
    except OSError as exc:
        report.add(
            "data_dir",
            "error",
            f"{subject}cannot be written ({exc.strerror})",
            "free some space or fix the mount",
        )
        return False
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
    return True


def _check_lock(report: DoctorReport, lock: Path) -> None:
    if not lock.exists():
        report.add("lock", "ok", "free (no sync has taken it yet)")
        return
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError as exc:
        report.add("lock", "error", f"cannot open {lock} ({exc.strerror})", "fix its permissions")
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        report.add("lock", "ok", "free")
    except BlockingIOError:
        pid = lock.read_text().strip() or "?"
        report.add(
            "lock",
            "warn",
            f"held: a sync or compaction is running now (pid {pid})",
            "nothing to do unless it never ends (the lock goes with the process)",
        )
    except OSError as exc:
        report.add("lock", "error", f"{lock} cannot be locked ({exc.strerror})", None)
    finally:
        os.close(fd)


def _check_disk(report: DoctorReport, directory: Path) -> None:
    free = shutil.disk_usage(directory).free
    text = f"{free / (1 << 30):.1f} GiB free in {directory}"
    if free < NO_DISK:
        report.add("disk", "error", text, "free some space: a sync stops when the disk is full")
    elif free < LOW_DISK:
        report.add("disk", "warn", text, "free some space before a large backfill")
    else:
        report.add("disk", "ok", text)


def _check_state(report: DoctorReport, path: Path, now: dt.datetime) -> list[str]:
    """The state's and the runs' findings; returns the committed files the state names (none
    where there is no readable state), which `_check_views` compares with the views."""

    if not has_state(path.parent):
        refused = stateless_data(path.parent)
        if refused is not None:
            report.add("state", "error", refused)
            return []
        no_state_found(report)
        return []
    try:
        state = StateDB(path, read_only=True)
    except StorageError as exc:
        # A file of another user says what to do itself; a corrupt one needs its backup.
        fix = (
            None
            if isinstance(exc, AccessDeniedError)
            else ("restore the data directory from a backup, or sync into a new --data-dir")
        )
        report.add("state", "error", str(exc), fix)
        return []
    try:
        runs = settled_runs(state.runs_rows(), path.parent / LOCK_FILE)
        live = state.live_files()
    finally:
        state.close()
    format_found(report, state.format_version)
    runs_found(report, runs, now)
    return live


def _check_files(report: DoctorReport, data_dir: Path, live: list[str]) -> bool:
    """Every file the readers read is Parquet, by its footer alone (10M operations: a few hundred
    files): a damaged one made every reader fail with DuckDB's "too small to be a Parquet file"
    while doctor said ok. False when one is damaged."""
    try:
        damaged = damaged_files(data_dir, live)
    except StorageError:
        return True  # the state's own finding said why it cannot be read
    for error in damaged:
        report.add("files", "error", error.problem, error.fix)
    if not damaged and live:
        report.add("files", "ok", f"{len(live):,} committed file(s) and the tables are Parquet")
    return not damaged


def _check_views(report: DoctorReport, data_dir: Path, live: list[str]) -> None:
    """`opsaudit.duckdb` answers as a DuckDB shell in the data directory would see it: every
    file its views name is there (issue 23: doctor called a broken views file ok), and it names
    every committed file of `live` (the state's) that it reads."""

    path = data_dir / VIEWS_DB
    if not path.is_file():
        return  # written by the first sync
    from exporter.core.duck import duckdb, readable_dir

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        report.add("views", "ok", f"{VIEWS_DB} is open in another program (not checked)")
        return
    try:
        # Its paths are relative to the data directory, as `cd <data-dir> && duckdb` sees them;
        # count(*) reads each named file's footer only. Bound, not spliced: a path may hold a '.
        with readable_dir(data_dir.resolve()) as seen:
            con.execute("SET file_search_path = ?", [seen.as_posix()])
            versions = con.execute("SELECT count(*) FROM operation_versions").fetchone()
        # Every committed file of the versions and the superseded record named by its views
        # (quoted, relative: analytics.views; the report's records are read through their
        # total): a sync that found the file open in another program left it naming older ones.
        named = "\n".join(
            sql
            for (sql,) in con.execute(
                "SELECT sql FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        )
        stale = sum(
            f"'{path}'" not in named
            for path in live
            if path.startswith((f"{VERSIONS_DIR}/", f"{SUPERSEDED_DIR}/"))
        )
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        report.add(
            "views",
            "warn",
            f"{VIEWS_DB} does not answer: {first}",
            "run `opsaudit sync` (it rewrites the file); meanwhile use `opsaudit query`",
        )
        return
    finally:
        con.close()
    count = versions[0] if versions else 0
    if stale:
        report.add(
            "views",
            "warn",
            f"{VIEWS_DB} answers ({count:,} operation versions) but does not name {stale:,} "
            "file(s) the dataset has (a sync or compact that found it open in another program, "
            "or was stopped before it rewrote it, left it behind): the DuckDB CLI reads an "
            "older trail",
            "run `opsaudit sync` (it rewrites the file; close any program that holds it open "
            "first); meanwhile use `opsaudit query`",
        )
        return
    report.add("views", "ok", f"{VIEWS_DB} answers ({count:,} operation versions)")
