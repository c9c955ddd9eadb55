"""The webhook's settings, checked before a run (issue 22): its URL as it may be shown (its
scheme, host and port alone: userinfo, path, query and fragment are where tokens live), a URL no
request could ever be made of refused up front (exit 2), and its Standard Webhooks secret and
signature."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import socket
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from exporter.core.errors import ConfigError

__all__ = [
    "connect_within",
    "read_webhook_secret",
    "safe_host",
    "safe_url",
    "sign",
    "validate_webhook_url",
]

# scheme://host[:port], as urlsplit cuts it, from any text (also one whose port or IPv6
# literal makes urlsplit raise), once `safe_url` has cut the userinfo off.
_SHOWN = re.compile(
    r"(?P<scheme>[^:/?#]+)://(?P<host>\[[^\]/?#]*\]?|[^:/?#]*)(?P<port>:[^/?#]*)?(?P<rest>.*)",
    re.DOTALL,
)
# What http.client refuses in a request target or a host (InvalidURL): spaces and controls.
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")


def safe_url(url: str) -> str:
    """The webhook URL as it may be printed: scheme://host[:port], then "/…" for whatever
    followed (Slack's and Discord's tokens are in the path, others' in the query or the
    userinfo); a port only when it is a number (a malformed one may be the end of a
    password)."""
    head = url.strip()
    scheme, sep, rest = head.partition("://")
    # The userinfo is in the authority alone (up to the first "/", "?" or "#", as urlsplit
    # reads it): up to the last "@" before the query, a path's "@" (`/hooks/abc@TOKEN`) was
    # taken for the userinfo's end, and what followed it shown as the host. A password holding
    # an unencoded "/" is then shown as a host of its user name, never its secret part.
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if sep and "@" in authority:
        head = f"{scheme}://{authority.rsplit('@', 1)[1]}{rest[len(authority) :]}"
    m = _SHOWN.match(head)
    if m is None:
        return "(not shown)"
    port = m["port"] if m["port"] and m["port"][1:].isdigit() else ""
    more = "/…" if m["rest"] not in ("", "/") else m["rest"]
    return f"{m['scheme']}://{m['host']}{port}{more}"


def safe_host(url: str) -> str:
    """The webhook URL's host, and its port when it names one: what a summary names it by
    (nothing of its path either, where a receiver's token may live too)."""
    m = _SHOWN.match(safe_url(url))
    return "(not shown)" if m is None else f"{m['host']}{m['port'] or ''}"


def validate_webhook_url(url: str) -> str:
    """An http(s) URL a request can be made of, or `ConfigError` (exit 2) naming its safe part."""
    if (problem := _why_unsendable(url.strip())) is not None:
        raise ConfigError(f"--webhook {safe_url(url)}{problem}")
    return url.strip()


def _why_unsendable(url: str) -> str | None:
    """Why no attempt could ever send to `url` (the end of a message naming it), or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # a port out of range or not a number, an IPv6 literal without its ]
        port = 0
    if port == 0:  # (port 0 parses, but nothing can be reached there)
        return ": its port is not a number from 1 to 65535, or its IPv6 address lacks its ]"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return " is not an http(s) URL with a host"
    try:
        # As the name lookup does, failing every attempt for a label over 63 characters or empty.
        parts.hostname.encode("idna")
        unsendable = _UNSENDABLE.search(parts.hostname) is not None
    except UnicodeError:
        unsendable = True
    if unsendable:
        return ": its host is not a DNS name (labels of 1 to 63 characters, no spaces)"
    target = parts.path + parts.query
    if not target.isascii() or _UNSENDABLE.search(target):
        # http.client writes the request line in ASCII (UnicodeEncodeError at every attempt).
        return (
            ": its path and query must be ASCII without spaces or control characters: "
            "percent-encode the others (Ö as %C3%96)"
        )
    return None


def read_webhook_secret(path: Path) -> bytes:
    """The signing key of a Standard Webhooks secret file (`whsec_<base64>`); `ConfigError`
    (exit 2) when missing or malformed. The secret itself is never part of a message."""
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and _looks_like_a_secret(str(path)):
            # The secret where its file's path goes ("$(cat whsec)", the variable set to it):
            # not echoed into cron's mail and the log.
            raise ConfigError(
                "--webhook-secret-file: no such file, and what was given looks like a secret, "
                "not a file's path (not shown): write the secret to a file and give that "
                "file's path"
            ) from None
        raise ConfigError(
            f"--webhook-secret-file {path}: cannot read it ({exc.strerror})"
        ) from None
    except UnicodeDecodeError:  # exit 5, "a bug", before; as --api-key-file says it
        raise ConfigError(
            f"--webhook-secret-file {path} is not text (UTF-8): save the secret as plain text"
        ) from None
    encoded = text.removeprefix("whsec_")
    try:
        key = base64.b64decode(encoded, validate=True)
    except ValueError:
        key = b""
    if not key:
        raise ConfigError(
            f"--webhook-secret-file {path} does not hold a Standard Webhooks secret "
            "(whsec_ followed by base64)"
        )
    return key


def _looks_like_a_secret(text: str) -> bool:
    """A missing secret file's "path" that is a Standard Webhooks secret: `whsec_...`, or the
    base64 of 16 bytes or more whose directory (a secret's "/" is base64's) does not exist."""
    text = text.strip()
    if text.startswith("whsec_"):
        return True
    try:
        key = base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return len(key) >= 16 and ("/" not in text or not Path(text).parent.is_dir())


def sign(key: bytes, event_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value (Standard Webhooks, v1 = HMAC-SHA256)."""
    message = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def connect_within(
    address: tuple[str, int], timeout: float | None, source_address: Any = None
) -> socket.socket:
    """`socket.create_connection` (http.client's `_create_connection`) with the name lookup
    bounded by `timeout` too: getaddrinfo has no timeout of its own, and a resolver that hangs
    held an attempt past --webhook-timeout. The lookup runs in a thread left to finish."""
    host, port = address
    found: list[Any] = []
    failed: list[Exception] = []

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:  # (a label over 63 characters: UnicodeError)
            failed.append(exc)

    thread = threading.Thread(target=lookup, name="opsaudit-webhook-lookup", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError("name lookup")
    if failed:
        raise failed[0]
    error: OSError = OSError("the name has no address")
    for family, kind, proto, _name, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            error = exc
        else:
            return sock
    raise error
