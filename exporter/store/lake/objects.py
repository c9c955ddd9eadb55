"""Small control objects beside the tables (marker, lease, state snapshots), with conditional writes.

Remote locations go through `obstore` (Python bindings of the Rust `object_store` crate that
delta-rs itself uses: same credential chain, same endpoint handling, typed errors for
If-None-Match / If-Match failures). Local directories use the filesystem directly, because
obstore's `LocalStore` does not implement If-Match updates: create is `link()` (fails if the name
exists), update is compare-and-replace under `flock` on the current file.

Every operation raises `OpsauditError` subclasses with one short line: bucket missing and
access denied are configuration errors (exit 2), an unreachable endpoint is exit 5, anything
else is a `StorageError`. Server bodies and request details are not repeated in messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter.core.errors import ConfigError, ExitCode, OpsauditError, StorageError
from exporter.core.layout import fsync_dir, write_aside
from exporter.store.lake.location import (
    Location,
    check_environment,
    option_bool,
    option_duration,
    redact,
)


class LakeAccessError(ConfigError):
    """The bucket does not exist or the credentials are refused (exit 2)."""


class LakeUnreachableError(OpsauditError):
    """The object store could not be reached (DNS, refused connection, timeouts): exit 5."""

    exit_code = ExitCode.FATAL


class PreconditionFailed(Exception):
    """A conditional write lost: the object exists (create) or changed (update)."""

    def __str__(self) -> str:  # what a message quoting it says (the key alone said nothing)
        return f"{self.args[0]}: changed by another writer meanwhile (a conditional write lost)"


@dataclass(frozen=True)
class ObjectMeta:
    key: str  # relative to the location root
    size: int
    etag: str
    last_modified: datetime  # server time (remote) or mtime (local), UTC


# Client options for obstore; retries bounded so a dead endpoint fails in seconds, not minutes.
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "timeout",
    "pool_idle_timeout",
    "proxy_url",
    "user_agent",
    "http1_only",
    "http2_only",
}
# delta-rs-only options that object_store would reject.
_DELTA_ONLY = {
    "aws_s3_allow_unsafe_rename",
    "aws_s3_locking_provider",
    "delta_dynamo_table_name",
    "aws_force_credential_load",
    "max_retries",
    "retry_timeout",
}


def _duration(value: str, key: str) -> timedelta:
    """As deltalake reads the same option (parse_storage_options checked it)."""
    duration = option_duration(value)
    if duration is None:
        raise ConfigError(f"--storage-option {key}: not a duration (e.g. 30s)")
    return duration


# Per URL scheme: where its credentials come from, its plain-http switch and its endpoint
# setting, as a message names them (an Azure key error gave AWS's advice).
_CREDENTIALS = {
    "s3": "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, instance role",
    "az": "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_KEY, AZURE_CLIENT_ID with a secret, "
    "managed identity",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT, the instance's account",
}
# Where a client without credentials in the environment asks for an instance's: the metadata
# services' addresses and their token paths (EC2, ECS task roles, Azure managed identity, GCE;
# the paths also behind a moved endpoint, AWS_METADATA_ENDPOINT).
_METADATA_HOSTS = (
    "169.254.169.254",
    "169.254.170.2",
    "metadata.google.internal",
    "/latest/api/token",
    "/latest/meta-data/iam/",
    "/metadata/identity/oauth2/token",
    "/computeMetadata/v1/",
)
_ALLOW_HTTP = {"s3": "AWS_ALLOW_HTTP", "az": "AZURE_ALLOW_HTTP", "gs": "allow_http"}
_ENDPOINT = {"s3": "AWS_ENDPOINT_URL", "az": "AZURE_ENDPOINT", "gs": ""}


def _no_credentials(location: Location, doing: str) -> LakeAccessError:
    """None in the environment: the client asked the instance metadata service for a role's,
    which failed (off a cloud: refused, timed out or denied). Said as an unreachable store
    (or access denied), it sent the operator after the endpoint."""
    return LakeAccessError(
        f"{doing} {location.display}: no credentials: none in the environment "
        f"({_CREDENTIALS[location.scheme]}), and the instance metadata service gave none"
    )


def classify(exc: BaseException, location: Location, doing: str) -> OpsauditError:
    """Turn an obstore/deltalake/OS error into one short, secret-free opsaudit error."""
    text = str(exc)
    # A server's error body may quote the request, the environment's SAS token in its query.
    first = scrubbed(text.splitlines()[0] if text else type(exc).__name__, location)[:300]
    where = location.display
    name = type(exc).__name__
    if "NoSuchBucket" in text or ("404 Not Found" in text and "list request" in text):
        return LakeAccessError(
            f"{doing} {where}: the bucket {location.bucket!r} does not exist "
            "(create it first; opsaudit never creates buckets)"
        )
    if any(host in text for host in _METADATA_HOSTS):
        return _no_credentials(location, doing)
    if (
        name in ("PermissionDeniedError", "UnauthenticatedError", "PermissionError")
        or re.search(r"\b(401 Unauthorized|403 Forbidden)\b", text)
        or any(s in text for s in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"))
    ):
        return LakeAccessError(
            f"{doing} {where}: access denied; check the credentials in the environment "
            f"({_CREDENTIALS[location.scheme]}) and the bucket's or container's policy"
        )
    if any(
        s in text
        for s in (
            "error sending request",
            "Connection refused",
            "connection refused",
            "dns error",
            "timed out",
            "operation timed out",
            "tcp connect",
        )
    ):
        setting = _ENDPOINT[location.scheme]
        endpoint = (
            next((v for k, v in location.options.items() if k.upper() == setting), "")
            if setting
            else ""
        )
        return LakeUnreachableError(
            f"{doing} {where}: the object store is unreachable"
            # Its scheme, host and port alone: a token may ride in its path or query string.
            + (
                f" at {urlsplit(endpoint)._replace(path='', query='', fragment='').geturl()}"
                if endpoint
                else ""
            )
            + " (network, DNS or endpoint setting)"
        )
    if isinstance(exc, OpsauditError):
        return exc
    if "HTTP error: builder error" in text:  # reqwest refused the request before sending it
        return ConfigError(
            f"{doing} {where}: the object store's HTTP client refused the endpoint; an http:// "
            f"endpoint needs {_ALLOW_HTTP[location.scheme]}=true (--storage-option or the "
            "environment)"
        )
    return StorageError(f"{doing} {where}: {first}")


class Objects:
    """get/put/list/delete of small objects under a location, with conditional puts."""

    def get(self, key: str) -> tuple[bytes, ObjectMeta] | None:
        raise NotImplementedError

    def put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write `data`; returns the new etag. Raises `PreconditionFailed` when the condition
        (object absent / object still at etag `if_match`) does not hold."""
        raise NotImplementedError

    def list(self, prefix: str) -> list[ObjectMeta]:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def is_empty(self) -> bool:
        """Whether nothing at all is stored under the location."""
        raise NotImplementedError


class LocalObjects(Objects):
    def __init__(self, root: Path):
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key

    @staticmethod
    def _etag(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:32]

    def get(self, key: str) -> tuple[bytes, ObjectMeta] | None:
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
                st = os.fstat(fh.fileno())
        except FileNotFoundError:
            return None
        return data, ObjectMeta(
            key, len(data), self._etag(data), datetime.fromtimestamp(st.st_mtime, timezone.utc)
        )

    def _write_tmp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_aside(path, lambda fh: fh.write(data))

    @contextlib.contextmanager
    def _locked_current(self, path: Path) -> Iterator[bytes | None]:
        """The current content under an exclusive flock on the current inode (None if absent)."""
        while True:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                yield None
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    same = os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    continue  # replaced while we waited: lock the new file instead
                with os.fdopen(os.dup(fd), "rb") as fh:
                    yield fh.read()
                return
            finally:
                os.close(fd)

    def put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        path = self._path(key)
        try:
            tmp = self._write_tmp(path, data)
            try:
                if if_none_match:
                    try:
                        os.link(tmp, path)
                    except FileExistsError:
                        raise PreconditionFailed(key) from None
                elif if_match is not None:
                    with self._locked_current(path) as current:
                        if current is None or self._etag(current) != if_match:
                            raise PreconditionFailed(key)
                        os.replace(tmp, path)
                else:
                    os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
        return self._etag(data)

    def list(self, prefix: str) -> list[ObjectMeta]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        out = []
        for p in sorted(base.rglob("*")):
            if p.is_file() and not p.name.startswith("."):
                st = p.stat()
                out.append(
                    ObjectMeta(
                        str(p.relative_to(self.root)),
                        st.st_size,
                        "",
                        datetime.fromtimestamp(st.st_mtime, timezone.utc),
                    )
                )
        return out

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def is_empty(self) -> bool:
        return not self.root.exists() or not any(self.root.iterdir())


def _settings(location: Location) -> tuple[Any, Any]:
    """obstore's config and client options for `location`, from its storage options and the
    environment's client settings."""
    config: Any = {}
    client: Any = {
        "connect_timeout": timedelta(seconds=5),
        "timeout": timedelta(seconds=60),
    }
    family = location.family
    # The client's settings in the environment (AWS_ALLOW_HTTP...), as delta-rs reads them:
    # obstore, given client options, reads none of them there. An option given wins.
    environment = {
        key: value
        for key, value in os.environ.items()
        if key.lower().startswith(family) and key.lower().removeprefix(family) in _CLIENT_KEYS
    }
    for key, value in {**environment, **location.options}.items():
        low = key.lower()
        bare = low.removeprefix(family)
        if bare in _CLIENT_KEYS:
            if bare in ("allow_http", "allow_invalid_certificates", "http1_only", "http2_only"):
                client[bare] = option_bool(value) is True  # as deltalake reads it
            elif bare.endswith("timeout"):
                client[bare] = _duration(value, key)
            else:
                client[bare] = value
        elif low in _DELTA_ONLY or bare in ("conditional_put", "copy_if_not_exists"):
            continue  # meaningful to delta-rs only; obstore is told its conditional mode next
        elif low.startswith(family):
            config[low] = value
    if location.scheme == "s3":
        config["aws_conditional_put"] = "etag"
    return config, client


def _settings_refused(exc: BaseException, location: Location) -> str:
    """The client refused its settings: the options or the environment's (a credential among
    them). What it said, without any value it may quote back or locate (an Azure key's bad
    character was told by its code and offset)."""
    said = scrubbed((str(exc).splitlines() or [type(exc).__name__])[0], location)
    said = re.sub(r"(?i)(invalid (?:symbol|byte|character|length))[^.;:]*", r"\1", said)
    return (
        f"the object store's settings for {location.display} (--storage-option or the "
        f"environment's {location.family.upper()}*) were refused: {said[:200]}"
    )


def scrubbed(said: str, location: Location) -> str:
    """What the client or the server said, without the value of any storage option or of the
    environment's settings of the location's family (a credential among them), nor user info."""
    secrets = [*location.options.values()]
    if not location.is_local:  # a directory (file://) has no settings family
        family = location.family.upper()
        # (a short one, `true` or a region's digit, is no secret and would garble the text)
        secrets += [
            v for k, v in os.environ.items() if k.upper().startswith(family) and len(v) >= 8
        ]
    # A SAS token's fields, which a request may carry in another order.
    secrets += [part for value in secrets for part in value.split("&") if len(part) >= 8]
    for value in sorted(filter(None, secrets), key=len, reverse=True):
        said = said.replace(value, "***")
    return redact(said)


class RemoteObjects(Objects):
    """obstore over S3 / GCS / Azure, configured from the location's storage options."""

    def __init__(self, location: Location, *, max_retries: int = 3):
        self.location = location
        # Before any request, and before delta-rs reads the same variables (it panics).
        check_environment(location, os.environ)
        try:
            from obstore.store import from_url
        except ImportError:  # pragma: no cover - the lake extra installs it
            raise ConfigError(
                f"{location.display}: object storage needs the lake extra: pip install 'opsaudit[lake]'"
            ) from None
        config, client = _settings(location)
        retry: Any = {
            "max_retries": max_retries,
            "retry_timeout": timedelta(seconds=20),
            "backoff": {
                "init_backoff": timedelta(milliseconds=100),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        root = f"{location.scheme}://{location.bucket}/{location.prefix}".rstrip("/")
        extra: Any = {}
        provider = _profile_credentials() if location.scheme == "s3" else None
        if provider is not None:
            extra["credential_provider"] = provider
        try:
            self.store = from_url(
                root, config=config, client_options=client, retry_config=retry, **extra
            )
        except BaseException as exc:  # obstore panics (PanicException) on some bad keys
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise ConfigError(_settings_refused(exc, location)) from None

    def _fail(self, exc: BaseException, doing: str) -> OpsauditError:
        return classify(exc, self.location, doing)

    def get(self, key: str) -> tuple[bytes, ObjectMeta] | None:
        import obstore

        try:
            result = obstore.get(self.store, key)
            data = bytes(result.bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(exc, f"cannot read {key} in") from None
        m = result.meta
        return data, ObjectMeta(key, m["size"], self._tag(m), m["last_modified"])

    def _tag(self, meta: Any) -> str:
        """The token a later If-Match names: the ETag, except on GCS, where object_store's
        conditional update matches the object's generation (x-goog-if-generation-match) and
        refuses an ETag alone ("Version required for conditional update")."""
        tag = meta["version"] if self.location.scheme == "gs" else meta["e_tag"]
        return str(tag or "")

    def put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        mode: Any = "overwrite"
        if if_none_match:
            mode = "create"
        elif if_match is not None:
            mode = {"version": if_match} if self.location.scheme == "gs" else {"e_tag": if_match}
        try:
            result = obstore.put(self.store, key, data, mode=mode)
        except (AlreadyExistsError, PreconditionError):
            raise PreconditionFailed(key) from None
        except FileNotFoundError:
            if if_match is not None:  # If-Match on a missing object: S3 answers 404
                raise PreconditionFailed(key) from None
            raise self._fail(FileNotFoundError(key), f"cannot write {key} in") from None
        except Exception as exc:
            raise self._fail(exc, f"cannot write {key} in") from None
        return self._tag(result)

    def list(self, prefix: str) -> list[ObjectMeta]:
        import obstore

        try:
            out = []
            for chunk in obstore.list(self.store, prefix or None):
                for m in chunk:
                    out.append(
                        ObjectMeta(m["path"], m["size"], m["e_tag"] or "", m["last_modified"])
                    )
        except Exception as exc:
            raise self._fail(exc, "cannot list") from None
        return sorted(out, key=lambda m: m.key)

    def delete(self, key: str) -> None:
        import obstore

        try:
            obstore.delete(self.store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._fail(exc, f"cannot delete {key} in") from None

    def is_empty(self) -> bool:
        import obstore

        try:
            stream = obstore.list(self.store, None, chunk_size=1)
            first: list[Any] = next(iter(stream), [])
        except Exception as exc:
            raise self._fail(exc, "cannot list") from None
        return not first


def profile_keys() -> dict[str, str]:
    """Keys of the AWS profile in AWS_PROFILE, resolved by boto3 (when installed), for
    delta-rs: deltalake 1.6 reads keys from the environment, web identity and instance roles,
    but not from profiles (it falls through to the instance metadata service). Empty when keys
    are in the environment, no profile is set or boto3 is missing. Never logged."""
    if os.environ.get("AWS_ACCESS_KEY_ID") or not os.environ.get("AWS_PROFILE"):
        return {}
    try:
        import boto3
    except ImportError:
        return {}
    try:
        creds = boto3.Session().get_credentials()
    except Exception as exc:  # botocore.exceptions.ProfileNotFound and friends
        raise ConfigError(f"AWS_PROFILE: {str(exc).splitlines()[0][:200]}") from None
    if creds is None:
        return {}
    frozen = creds.get_frozen_credentials()
    keys = {"AWS_ACCESS_KEY_ID": frozen.access_key, "AWS_SECRET_ACCESS_KEY": frozen.secret_key}
    if frozen.token:
        keys["AWS_SESSION_TOKEN"] = frozen.token
    return keys


def _profile_credentials() -> Any:
    """AWS profiles (AWS_PROFILE, SSO, ~/.aws/config): object_store reads env vars, web identity
    and instance/container roles but not profiles, while delta-rs does; with a profile and no
    keys in the environment, let boto3 resolve them (when installed) so that the lease and state
    objects use the same identity as the table commits."""
    if os.environ.get("AWS_ACCESS_KEY_ID") or not os.environ.get("AWS_PROFILE"):
        return None
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        return None
    return Boto3CredentialProvider(boto3.Session())


def objects_for(location: Location) -> Objects:
    return LocalObjects(location.path) if location.is_local else RemoteObjects(location)


__all__ = [
    "LakeAccessError",
    "LakeUnreachableError",
    "LocalObjects",
    "ObjectMeta",
    "Objects",
    "PreconditionFailed",
    "RemoteObjects",
    "classify",
    "objects_for",
    "profile_keys",
    "scrubbed",
]
