"""Where a dataset lives: `--data-dir` values parsed into a `Location`, and `--storage-option`s.

Accepted `--data-dir` forms:

- a plain path (`data`, `/var/lib/opsaudit`, `~/trail`) or `file:///abs/path`: local disk;
- `s3://bucket/prefix` (also `s3a://`), `gs://bucket/prefix` (also `gcs://`),
  `az://container/prefix` (also `abfs://`, `abfss://`, `azure://`): object storage.

Anything else that looks like a URL (`ftp://host/x`, `http://...`, `s3:/bucket`, `s3:bucket`) is
refused with a `ConfigError` (exit 2): before this module such a value was silently taken as a
relative directory named `s3:`.

Storage options are passed through under the names deltalake (delta-rs / object_store) uses,
e.g. `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`,
`conditional_put`. Only an allow-list of options known to carry no secret is accepted (any other
name exits 2): credentials come only from the standard environment/profile chains, so they never
sit in shell history, cron files or process lists. No option value appears in a `Location`'s repr
or in a message about the options.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from exporter.core.errors import ConfigError, check_type
from exporter.core.pathcheck import data_dir_problem, plain_path

# scheme as typed -> canonical scheme
_SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gs",
    "gcs": "gs",
    "az": "az",
    "azure": "az",
    "abfs": "az",
    "abfss": "az",
    "file": "file",
}

# The options accepted by `--storage-option`: an allow-list of settings known to carry no secret
# (issue 19: a deny-list missed aliases such as AZURE_STORAGE_MASTER_KEY). Credentials come only
# from the environment or profile chains. Names are matched case-insensitively, with or without the
# family prefix deltalake / object_store accept (`AWS_REGION` or `region`).
_SCHEME_FAMILY = {"s3": "aws_", "gs": "google_", "az": "azure_"}
_FAMILIES = tuple(_SCHEME_FAMILY.values())
_CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "timeout",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "http1_only",
        "http2_only",
        "user_agent",
        "max_retries",
        "retry_timeout",
        "skip_signature",
        "disable_tagging",
    }
)
_FAMILY_OPTIONS = {
    "aws_": frozenset(
        {
            "region",
            "default_region",
            "endpoint",
            "endpoint_url",
            "virtual_hosted_style_request",
            "s3_express",
            "unsigned_payload",
            "checksum_algorithm",
            "imdsv1_fallback",
            "metadata_endpoint",
            "request_payer",
            "server_side_encryption",
            "sse_kms_key_id",
            "sse_bucket_key_enabled",
            "conditional_put",
            # delta-rs' own (no secret): unused with conditional puts, accepted as before
            "s3_allow_unsafe_rename",
            "s3_locking_provider",
            "force_credential_load",
        }
    ),
    "google_": frozenset(),
    "azure_": frozenset(
        {
            "storage_account_name",
            "account_name",
            "endpoint",
            "storage_endpoint",
            "use_emulator",
            "storage_use_emulator",
            "use_fabric_endpoint",
            "use_azure_cli",
            "client_id",
            "storage_client_id",
            "tenant_id",
            "storage_tenant_id",
            "authority_id",
            "msi_endpoint",
            "object_id",
            "msi_resource_id",
            "federated_token_file",
        }
    ),
}
# Options without a family prefix: the client's, and delta-rs' conditional_put and lock table.
_BARE_OPTIONS = _CLIENT_OPTIONS | {"conditional_put", "delta_dynamo_table_name"}

# The options whose value has a type (names without their family prefix). deltalake parses these
# only when it opens a table, and then says "failed to parse "<value>"" (exit 6, the value shown),
# so they are checked here, where a bad one is a usage error naming the option alone.
_INTEGER_OPTIONS = frozenset({"max_retries", "pool_max_idle_per_host"})
_DURATION_OPTIONS = frozenset({"timeout", "connect_timeout", "pool_idle_timeout", "retry_timeout"})
# A request given no time at all can only fail: refused, as a zero --max-age is.
_POSITIVE_OPTIONS = frozenset({"timeout", "connect_timeout"})
_BOOLEAN_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "http1_only",
        "http2_only",
        "skip_signature",
        "disable_tagging",
        "virtual_hosted_style_request",
        "s3_express",
        "unsigned_payload",
        "imdsv1_fallback",
        "request_payer",
        "sse_bucket_key_enabled",
        "s3_allow_unsafe_rename",
        "force_credential_load",
        "use_emulator",
        "storage_use_emulator",
        "use_fabric_endpoint",
        "use_azure_cli",
    }
)
# The options that take one of a few words, as object_store reads them (the encryption's
# exactly, the checksum's in any case); anything else it refuses, quoting the value.
_WORD_OPTIONS = {
    "server_side_encryption": ("AES256", "aws:kms", "aws:kms:dsse", "sse-c"),
    "checksum_algorithm": ("sha256",),
}
_ANY_CASE_OPTIONS = frozenset({"checksum_algorithm"})
# The options that are a URL the client connects to: object_store panics on one it cannot parse
# (`minio:9000`, a port of 90000), a traceback and exit 1 ("partial") before this check.
_URL_OPTIONS = frozenset(
    {"endpoint", "endpoint_url", "storage_endpoint", "metadata_endpoint", "msi_endpoint"}
)
# object_store's spellings of a boolean (case-insensitive); anything else it refuses.
_TRUE = frozenset({"1", "true", "on", "yes", "y"})
_FALSE = frozenset({"0", "false", "off", "no", "n"})
# The units of the duration syntax deltalake and object_store read (humantime), in seconds;
# months and years left out (humantime's `M` and `m` differ only in case).
_UNIT_SECONDS = {
    **dict.fromkeys(("ns", "nsec", "nanos"), 1e-9),
    **dict.fromkeys(("us", "usec", "\u00b5s"), 1e-6),
    **dict.fromkeys(("ms", "msec", "millis"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "week", "weeks"), 604800),
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?) *([a-z\u00b5]+) *")


def option_bool(value: str) -> bool | None:
    """A boolean storage option's value, as object_store reads it (`yes`, `0`, ...); None if
    it is not one."""
    low = value.lower()
    return True if low in _TRUE else False if low in _FALSE else None


def option_duration(value: str) -> timedelta | None:
    """A duration storage option's value (`30s`, `1.5s`, `500ms`, `1m 30s`, `0`) as deltalake and
    object_store read it; None if it is not one (a bare number other than 0 is not)."""
    if value == "0":
        return timedelta(0)
    pos, seconds = 0, 0.0
    while pos < len(value):
        m = _DURATION_PART.match(value, pos)
        if m is None or m[2] not in _UNIT_SECONDS:
            return None
        seconds += float(m[1]) * _UNIT_SECONDS[m[2]]
        pos = m.end()
    try:
        return timedelta(seconds=seconds) if value else None
    except OverflowError:  # over 999,999,999 days
        return None


def _check_value(key: str, value: str) -> None:
    """`ConfigError` naming `key`, never `value` (it may be a secret typed under a wrong name),
    for a value deltalake or object_store would refuse."""
    if any(c < " " or c == "\x7f" for c in value):
        # No setting holds a line break or a control character; an error quoting the value's
        # first line (a redaction of the whole value misses it) would show part of it.
        raise ConfigError(f"--storage-option {key}: its value holds a control character")
    bare = key.lower()
    for family in _FAMILIES:
        bare = bare.removeprefix(family)
    if bare in _INTEGER_OPTIONS and not (
        value.isascii() and value.isdigit() and int(value) < 2**64
    ):
        raise ConfigError(f"--storage-option {key}: not a whole number (e.g. 3)")
    if bare in _DURATION_OPTIONS:
        duration = option_duration(value)
        if duration is None:
            raise ConfigError(
                f"--storage-option {key}: not a duration: use a number and a unit (30s, 500ms, 2m)"
            )
        if bare in _POSITIVE_OPTIONS and not duration:
            raise ConfigError(
                f"--storage-option {key}: no time at all, every request would fail: give a "
                "duration above 0 (30s)"
            )
    if bare in _BOOLEAN_OPTIONS and option_bool(value) is None:
        raise ConfigError(f"--storage-option {key}: not a boolean: use true or false")
    if bare in _URL_OPTIONS and not _endpoint_ok(value):
        raise ConfigError(f"--storage-option {key}: {_NOT_ENDPOINT}")
    words = _WORD_OPTIONS.get(bare)
    if words is not None:
        given = value.lower() if bare in _ANY_CASE_OPTIONS else value
        if given not in words:
            raise ConfigError(f"--storage-option {key}: not one of {', '.join(words)}")


_NOT_ENDPOINT = (
    "not an http(s) URL with a host, a port from 1 to 65535 if any, and no user info "
    "(e.g. http://127.0.0.1:9000)"
)
# The names one setting goes by (object_store's aliases): an option under one wins over the
# environment's variable under the other.
_SAME_SETTING = {"endpoint_url": "endpoint", "storage_endpoint": "endpoint"}
# Endpoints read from the environment alone (no option spells them), with the setting they
# stand for: the AWS SDK's S3-only endpoint, on which object_store panics as on AWS_ENDPOINT_URL.
_ENVIRONMENT_ENDPOINTS = {"aws_": [("AWS_ENDPOINT_URL_S3", "endpoint")]}


def check_environment(location: Location, environ: Mapping[str, str]) -> None:
    """`ConfigError` naming the variable, never its value, for an endpoint of `location`'s
    family in `environ` that delta-rs and object_store read and would panic on (AWS_ENDPOINT_URL
    `minio:9000`, no scheme: "unexpected error", exit 5), as `--storage-option` refuses it; an
    option for the same setting wins over the variable (as there) and is checked as an option."""
    if location.is_local:
        return
    family = location.family
    given = {k.lower().removeprefix(family) for k in location.options}
    given = {_SAME_SETTING.get(k, k) for k in given}
    names = [((family + bare).upper(), bare) for bare in sorted(_URL_OPTIONS)]
    names = [(name, bare) for name, bare in names if known_option(name)]
    names += _ENVIRONMENT_ENDPOINTS.get(family, [])
    for name, bare in names:  # they read upper-case names alone
        value = environ.get(name)
        if value is None or _SAME_SETTING.get(bare, bare) in given:
            continue
        if not _endpoint_ok(value):
            raise ConfigError(f"the environment's {name}: {_NOT_ENDPOINT}")


def _endpoint_ok(value: str) -> bool:
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # a port out of range or not a number, an IPv6 address without its ]
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and port != 0
        and "@" not in value  # user info, shown wherever the endpoint is
        and " " not in value
    )


def known_option(key: str) -> bool:
    """Whether `key` is an accepted (non-secret) storage option."""
    low = key.lower()
    if low in _BARE_OPTIONS:
        return True
    for family in _FAMILIES:
        if low.startswith(family):
            bare = low.removeprefix(family)
            return bare in _CLIENT_OPTIONS or bare in _FAMILY_OPTIONS[family]
    return False


_URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.S)
_USERINFO = re.compile(r"(?<=://)[^/@]*@")


def redact(value: str) -> str:
    """A URL or option value with any user:password@ part hidden."""
    return _USERINFO.sub("***@", value)


def _shown(text: str) -> str:
    """A refused `--data-dir` URL as its message shows it: everything between its scheme and its
    last '@' hidden (user info whose '/', '?' or '#' urlsplit and `redact` take for the end of
    it), its query string and fragment (a SAS or presigned token) left out."""
    head, at, tail = text.rpartition("@")
    if at:
        scheme = _URL_LIKE.match(head)
        slashes = "//" if scheme and scheme[2].startswith("//") else ""
        tail = f"{scheme[1]}:{slashes}***@{tail}" if scheme else f"***@{tail}"
    return re.split(r"[?#]", tail, maxsplit=1)[0]


@dataclass(frozen=True)
class Location:
    """A parsed `--data-dir`: local directory or object-storage prefix, plus storage options.

    `url` has no trailing slash: `s3://bucket/prefix`, `file:///abs/path`. `options` are the
    deltalake storage options (allow-listed: never credentials); `repr()` shows their names,
    never a value.
    """

    scheme: str  # canonical: file | s3 | gs | az
    url: str
    bucket: str | None = None
    prefix: str = ""
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def family(self) -> str:
        """The prefix of its settings' names, lower-case (`aws_`, `google_`, `azure_`): in the
        options deltalake and object_store take and in the environment (upper-case there)."""
        return _SCHEME_FAMILY[self.scheme]

    @property
    def path(self) -> Path:
        """The local directory (only for `file` locations)."""
        if not self.is_local:
            raise ValueError(f"{self.display} is not a local directory")
        return Path(self.url[len("file://") :])

    def child(self, *parts: str) -> str:
        """The URL of a child object or table: `child("operation_versions")`."""
        return "/".join([self.url, *(p.strip("/") for p in parts if p)])

    def table_uri(self, name: str) -> str:
        """What deltalake is given for table `name` (a plain path for local tables)."""
        return str(self.path / name) if self.is_local else self.child(name)

    @property
    def identity(self) -> str:
        """What tells datasets apart: the canonical scheme, the bucket and the key prefix with
        its %-escapes decoded, as deltalake and obstore decode them (`s3://b/pct%20x` and
        `s3a://b/pct x` name the same objects); a local location's URL."""
        if self.is_local:
            return self.url
        return f"{self.scheme}://{self.bucket}/{unquote(self.prefix)}".rstrip("/")

    @property
    def display(self) -> str:
        return redact(self.url)

    def __repr__(self) -> str:
        return f"Location({self.display!r}, options={sorted(self.options)!r})"

    __str__ = __repr__


DATA_DIR_EXPECTED = "a Path or str: a local directory, or an s3://, gs:// or az:// URL"


def storage_option_list(given: Iterable[str]) -> list[str]:
    """A library caller's storage options as a list: None raised a bare TypeError, a str (its
    characters) and a dict (its keys) each said "--storage-option without KEY=" (`ConfigError`
    naming what was given instead)."""
    expected = "a list of 'KEY=VALUE' strings ([] for none)"
    check_type("storage_options", given, Iterable, expected, but=(str, bytes, Mapping))
    return list(given)


def parse_storage_options(items: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """`["KEY=VALUE", ...]` (or a mapping) as a dict; credentials and malformed items refused."""
    if items is None:
        return {}
    pairs: list[tuple[str, str]] = []
    if isinstance(items, Mapping):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:
        for item in items:
            check_type("a storage option", item, str, "a 'KEY=VALUE' string")
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(  # the item is not echoed: it may be a secret typed alone
                    "--storage-option without KEY=: expected KEY=VALUE, "
                    "e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000"
                )
            pairs.append((key.strip(), value.strip()))
    options: dict[str, str] = {}
    for key, value in pairs:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", key):
            raise ConfigError(f"--storage-option {key!r}: not a storage option name")
        if not known_option(key):
            raise ConfigError(
                f"--storage-option {key}: not an accepted option. Only settings known to carry "
                "no secret are (e.g. AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP, "
                "AZURE_STORAGE_ACCOUNT_NAME, AZURE_ENDPOINT; the list is in the README); "
                "credentials come from the environment or profile chain (e.g. AWS_ACCESS_KEY_ID "
                "/ AWS_SECRET_ACCESS_KEY / AWS_PROFILE, instance or workload roles)"
            )
        if key in options:
            raise ConfigError(f"--storage-option {key} given twice")
        _check_value(key, value)
        options[key] = value
    return options


def parse_location(
    value: str | Path, storage_options: Iterable[str] | Mapping[str, str] | None = None
) -> Location:
    """Parse a `--data-dir` value; unknown schemes and malformed URLs are a `ConfigError`."""
    # A library caller's None: "'NoneType' object has no attribute 'strip'"
    value = plain_path(value)  # a notebook's own path type (bytes: refused below)
    check_type("data_dir", value, (str, Path), DATA_DIR_EXPECTED)
    options = parse_storage_options(storage_options)
    if isinstance(value, Path):
        return _local(value, options)
    text = value.strip()
    if not text:
        raise ConfigError("--data-dir is empty")
    match = _URL_LIKE.match(text)
    # A Windows drive letter (C:\...) is a path, not a scheme.
    if match is None or (len(match.group(1)) == 1 and match.group(2)[:1] in ("\\", "/")):
        return _local(Path(text), options)
    scheme_typed = match.group(1).lower()
    rest = match.group(2)
    scheme = _SCHEMES.get(scheme_typed)
    if scheme is None:
        if not rest.startswith("//") and scheme_typed not in ("http", "https", "ftp", "sftp"):
            # "name:thing" with no // and an unknown scheme: an odd but legal directory name.
            return _local(Path(text), options)
        raise ConfigError(
            f"--data-dir {_shown(text)!r}: unsupported scheme {scheme_typed}://; use a local "
            "path, file://, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix"
        )
    if not rest.startswith("//"):
        raise ConfigError(
            f"--data-dir {_shown(text)!r}: malformed URL; write {scheme_typed}://bucket/prefix"
        )
    _refuse_credentials(text, scheme, scheme_typed, rest)
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise ConfigError(
            f"--data-dir {_shown(text)!r}: query strings and fragments are not accepted (tokens "
            "such as SAS signatures belong in the environment, not the URL)"
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"--data-dir {text!r}: file:// URLs must be local (file:///path)")
        if not parts.path:
            raise ConfigError(f"--data-dir {text!r}: file:// URL without a path")
        return _local(Path(parts.path), options)
    bucket = parts.netloc
    if not bucket:
        raise ConfigError(f"--data-dir {text!r}: no bucket; write {scheme_typed}://bucket/prefix")
    prefix = parts.path.strip("/")
    _check_key(text, scheme_typed, bucket, prefix)
    url = f"{scheme_typed}://{bucket}" + (f"/{prefix}" if prefix else "")
    return Location(scheme=scheme, url=url, bucket=bucket, prefix=prefix, options=options)


def _check_key(text: str, scheme_typed: str, bucket: str, prefix: str) -> None:
    """`ConfigError` for a prefix whose key (its %-escapes decoded, as deltalake and obstore
    decode them) has an empty, '.' or '..' segment, is not UTF-8, or has a `_delta_log`
    segment: the dataset's Delta tables would sit inside a table's log, which delta-rs then
    reads as that table's (the first sync exited 6 "No files in log segment", every later one
    "Invalid table version: 0", its objects left to delete by hand)."""
    try:
        key = unquote(prefix, errors="strict")
    except UnicodeDecodeError:
        raise ConfigError(
            f"--data-dir {text!r}: a %-escape in the prefix is not UTF-8 once decoded; write "
            "the prefix's characters as they are or escape their UTF-8 bytes"
        ) from None
    segments = key.split("/")
    if prefix and any(p in ("", ".", "..") for p in segments):
        raise ConfigError(f"--data-dir {text!r}: empty, '.' or '..' path segment in the prefix")
    if "_delta_log" in segments:
        raise ConfigError(
            f"--data-dir {text!r}: a '_delta_log' segment in the prefix: that is a Delta "
            "table's log, and this dataset's own Delta tables cannot live in one; give a "
            f"prefix without it (e.g. {scheme_typed}://{bucket}/opsaudit)"
        )


def _refuse_credentials(text: str, scheme: str, scheme_typed: str, rest: str) -> None:
    """User info before the host, or anywhere in an object store's URL: a secret key holding
    '/' or '#' put the rest of it in urlsplit's path or fragment, past its username check. A
    bucket holds no ':' either: a key without its '@' is no bucket."""
    authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
    if "@" in authority or (scheme != "file" and "@" in rest):
        raise ConfigError(
            f"--data-dir {_shown(text)!r}: credentials in the URL are not accepted; use the "
            "environment or profile chain"
        )
    if ":" in authority:
        raise ConfigError(
            f"--data-dir '{scheme_typed}://***': a bucket name holds no ':' (credentials in the "
            "URL are not accepted, an endpoint goes in --storage-option)"
        )


def _local(path: Path, options: dict[str, str]) -> Location:
    try:
        absolute = path.expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        # What the command line says of it (`pathcheck`); the library said "Symlink loop from".
        problem = data_dir_problem(path.expanduser())
        raise ConfigError(f"--data-dir {problem or f'{path}: {exc}'}") from exc
    return Location(scheme="file", url=f"file://{absolute}", options=options)


__all__ = [
    "Location",
    "check_environment",
    "option_bool",
    "option_duration",
    "parse_location",
    "parse_storage_options",
    "redact",
]
