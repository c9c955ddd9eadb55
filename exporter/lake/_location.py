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
`conditional_put`. Credentials are refused as options: they come only from the standard
environment/profile chains, so they never sit in shell history, cron files or process lists, and
they never appear in a `Location`'s repr or in any message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from exporter._errors import ConfigError

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

# Option names (upper-cased) that carry credentials: refused on the command line.
_CREDENTIAL_KEYS = {
    "AWS_ACCESS_KEY_ID",
    "ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SESSION_TOKEN",
    "AWS_TOKEN",
    "TOKEN",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "SERVICE_ACCOUNT",
    "SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "ACCOUNT_KEY",
    "ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "SAS_KEY",
    "SAS_TOKEN",
    "AZURE_STORAGE_TOKEN",
    "BEARER_TOKEN",
    "AZURE_CLIENT_SECRET",
    "CLIENT_SECRET",
    "AZURE_STORAGE_CLIENT_SECRET",
}
_SECRET_HINT = re.compile(r"SECRET|TOKEN|PASSWORD|SAS|ACCOUNT_KEY|ACCESS_KEY|CREDENTIAL", re.I)
_URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.S)
_USERINFO = re.compile(r"(?<=://)[^/@]*@")


def redact(value: str) -> str:
    """A URL or option value with any user:password@ part hidden."""
    return _USERINFO.sub("***@", value)


@dataclass(frozen=True)
class Location:
    """A parsed `--data-dir`: local directory or object-storage prefix, plus storage options.

    `url` has no trailing slash: `s3://bucket/prefix`, `file:///abs/path`. `options` are the
    deltalake storage options (never credentials); `repr()` shows them with secret-looking
    values hidden all the same.
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
    def display(self) -> str:
        return redact(self.url)

    def __repr__(self) -> str:
        shown = {
            k: ("***" if _SECRET_HINT.search(k) else redact(v)) for k, v in self.options.items()
        }
        return f"Location({self.display!r}, options={shown!r})"

    __str__ = __repr__


def parse_storage_options(items: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """`["KEY=VALUE", ...]` (or a mapping) as a dict; credentials and malformed items refused."""
    if items is None:
        return {}
    pairs: list[tuple[str, str]] = []
    if isinstance(items, Mapping):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(
                    f"--storage-option {item.split('=')[0]!r}: expected KEY=VALUE, "
                    "e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000"
                )
            pairs.append((key.strip(), value.strip()))
    options: dict[str, str] = {}
    for key, value in pairs:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", key):
            raise ConfigError(f"--storage-option {key!r}: not a storage option name")
        if key.upper() in _CREDENTIAL_KEYS:
            raise ConfigError(
                f"--storage-option {key}: credentials are not accepted as options; they come "
                "from the environment or profile chain (e.g. AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY / AWS_PROFILE, instance or workload roles)"
            )
        if key in options:
            raise ConfigError(f"--storage-option {key} given twice")
        options[key] = value
    return options


def parse_location(
    value: str | Path, storage_options: Iterable[str] | Mapping[str, str] | None = None
) -> Location:
    """Parse a `--data-dir` value; unknown schemes and malformed URLs are a `ConfigError`."""
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
            f"--data-dir {redact(text)!r}: unsupported scheme {scheme_typed}://; use a local "
            "path, file://, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix"
        )
    if not rest.startswith("//"):
        raise ConfigError(
            f"--data-dir {redact(text)!r}: malformed URL; write {scheme_typed}://bucket/prefix"
        )
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise ConfigError(
            f"--data-dir {redact(text.split('?')[0].split('#')[0])!r}: query strings and fragments are not accepted (tokens "
            "such as SAS signatures belong in the environment, not the URL)"
        )
    if parts.username or parts.password:
        raise ConfigError(
            f"--data-dir {redact(text)!r}: credentials in the URL are not accepted; use the "
            "environment or profile chain"
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
    if any(p in ("", ".", "..") for p in prefix.split("/")) and prefix:
        raise ConfigError(f"--data-dir {text!r}: empty, '.' or '..' path segment in the prefix")
    url = f"{scheme_typed}://{bucket}" + (f"/{prefix}" if prefix else "")
    return Location(scheme=scheme, url=url, bucket=bucket, prefix=prefix, options=options)


def _local(path: Path, options: dict[str, str]) -> Location:
    absolute = path.expanduser().resolve()
    return Location(scheme="file", url=f"file://{absolute}", options=options)


__all__ = ["Location", "parse_location", "parse_storage_options", "redact"]
