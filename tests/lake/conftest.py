"""Fixtures for the lake tests: a moto S3 server on 127.0.0.1 (a subprocess, see moto_server.py),
a fresh bucket per test, and AWS_* variables for that test only; likewise Azurite (Azure Blob
Storage, `azurite` / `container`) for test_other_clouds.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any, ClassVar

import pytest

SERVER = Path(__file__).with_name("moto_server.py")


@dataclass
class S3Server:
    endpoint: str
    proc: subprocess.Popen[str]

    def _post(self, path: str, body: Any = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(self.endpoint + path, data=data, method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def reset_log(self) -> None:
        self._post("/_ctl/reset")

    def log(self) -> list[list[str]]:
        with urllib.request.urlopen(self.endpoint + "/_ctl/log", timeout=10) as resp:
            return list(json.load(resp))

    def arm(self, pid: int, method: str, pattern: str, when: str = "before") -> None:
        """SIGKILL `pid` on its next `method` request whose path matches `pattern`."""
        self._post("/_ctl/arm", {"pid": pid, "method": method, "pattern": pattern, "when": when})

    def deny(self, method: str, pattern: str, times: int = 1) -> None:
        """Answer the next `times` `method` requests whose path matches `pattern` with 403
        (not applied; clients do not retry it)."""
        for _ in range(times):
            self.arm(0, method, pattern, "deny")

    def delay(self, method: str, pattern: str, seconds: float) -> None:
        """Hold the next `method` request whose path matches `pattern` for `seconds`, then
        apply and answer it."""
        self._post(
            "/_ctl/arm",
            {"pid": 0, "method": method, "pattern": pattern, "when": "delay", "seconds": seconds},
        )

    def disarm(self) -> None:
        """Drop every armed fault not fired yet."""
        self._post("/_ctl/disarm")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [sys.executable, str(SERVER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        pytest.fail(f"moto server did not start: {line!r}")
    server = S3Server(f"http://127.0.0.1:{int(line)}", proc)
    yield server
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


def set_aws_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-value")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


class _OnServer:
    """A bucket or container on a loopback server: its URLs and the options pointing at it."""

    scheme: ClassVar[str]
    name: str
    options: dict[str, str]

    def url(self, prefix: str = "trail") -> str:
        return f"{self.scheme}://{self.name}/{prefix}"

    def storage_options(self) -> list[str]:
        """The `--storage-option KEY=VALUE`s that point opsaudit at the server."""
        return [f"{k}={v}" for k, v in self.options.items()]


@dataclass
class Bucket(_OnServer):
    scheme: ClassVar[str] = "s3"
    name: str
    server: S3Server
    options: dict[str, str]

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.server.endpoint, region_name="us-east-1")

    def list_keys(self, prefix: str = "") -> list[str]:
        out = []
        for page in (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        ):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out


@pytest.fixture
def bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    set_aws_env(monkeypatch, s3_server.endpoint)
    b = Bucket(
        f"b-{uuid.uuid4().hex[:12]}",
        s3_server,
        {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true"},
    )
    b.client().create_bucket(Bucket=b.name)
    return b


@pytest.fixture
def auth_enforced(bucket: Any) -> Iterator[None]:
    """moto checks signatures against its IAM users from now on: our keys are unknown to it."""

    def set_count(value: str) -> None:
        req = urllib.request.Request(
            bucket.server.endpoint + "/moto-api/reset-auth",
            data=value.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(req, timeout=10):
            pass

    set_count("0")
    try:
        yield
    finally:
        set_count("inf")


# -- Azure Blob Storage: Azurite (npm package `azurite`, pinned in .ci/run) ------------------------

# Azurite's one account and its key: public, documented by Microsoft for the emulator only.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def azurite_binary() -> str | None:
    """`azurite-blob`: $OPSAUDIT_AZURITE (what .ci/run exports), else on PATH, else where .ci/run
    installs it by default."""
    named = os.environ.get("OPSAUDIT_AZURITE")
    if named:
        return named
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    for candidate in (
        shutil.which("azurite-blob"),
        *sorted(cache.glob("opsaudit-ci/azurite-*/node_modules/.bin/azurite-blob"), reverse=True),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@dataclass
class AzureServer:
    endpoint: str  # http://127.0.0.1:PORT (the account is the first path segment)
    proc: subprocess.Popen[str]

    def create_container(self, name: str) -> None:
        """Create Container, signed with the account key (SharedKey): object_store cannot."""
        date, version = formatdate(usegmt=True), "2021-08-06"
        to_sign = (
            "PUT\n\n\n\n\napplication/octet-stream\n\n\n\n\n\n\n"
            f"x-ms-date:{date}\nx-ms-version:{version}\n"
            f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
        )
        mac = hmac.new(base64.b64decode(AZURITE_KEY), to_sign.encode(), hashlib.sha256)
        req = urllib.request.Request(
            f"{self.endpoint}/{AZURITE_ACCOUNT}/{name}?restype=container",
            data=b"",
            method="PUT",
            headers={
                "Content-Type": "application/octet-stream",
                "x-ms-date": date,
                "x-ms-version": version,
                "Authorization": f"SharedKey {AZURITE_ACCOUNT}:"
                + base64.b64encode(mac.digest()).decode(),
            },
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201, resp.status


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureServer]:
    """Azurite's Blob service on 127.0.0.1, a free port, in memory, no telemetry. Skipped only
    where it is not installed and OPSAUDIT_AZURITE is unset (CI sets it: never skipped there)."""
    binary = azurite_binary()
    if binary is None:
        pytest.skip("Azurite is not installed (.ci/run: npm install azurite into a cache dir)")
    work = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen(
        [
            binary,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            "0",
            "--inMemoryPersistence",
            "--silent",
            "--disableTelemetry",
            "--skipApiVersionCheck",
        ],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    port = None
    for line in proc.stdout:  # three lines; the last names the port
        seen.append(line)
        found = re.search(r"listens on http://127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    if port is None:
        proc.kill()
        proc.wait()
        pytest.fail(f"Azurite did not start: {''.join(seen)!r}")
    # Whatever it prints later must not fill the pipe and stall it.
    drain = threading.Thread(target=_drain, args=(proc.stdout,), daemon=True)
    drain.start()
    yield AzureServer(f"http://127.0.0.1:{port}", proc)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    drain.join(timeout=5)
    proc.stdout.close()


@dataclass
class Container(_OnServer):
    scheme: ClassVar[str] = "az"
    name: str
    server: AzureServer
    options: dict[str, str]


@pytest.fixture
def container(azurite: AzureServer, monkeypatch: pytest.MonkeyPatch) -> Container:
    """A fresh container; the account key only in the environment (AZURE_STORAGE_ACCOUNT_KEY,
    read by deltalake and obstore alike), the rest as --storage-option values."""
    for name in list(os.environ):
        if name.startswith(("AZURE_", "AZURITE_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    c = Container(
        f"c-{uuid.uuid4().hex[:12]}",
        azurite,
        {
            "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
            "AZURE_ENDPOINT": f"{azurite.endpoint}/{AZURITE_ACCOUNT}",
            "AZURE_ALLOW_HTTP": "true",
        },
    )
    azurite.create_container(c.name)
    return c


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def _load_lakedata() -> Any:
    spec = importlib.util.spec_from_file_location(
        "lake_testdata", Path(__file__).with_name("lakedata.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lakedata = _load_lakedata()


@pytest.fixture
def make_versions() -> Any:
    """`make_versions(batch, rows=50)`: a batch of operation_versions rows (lakedata.py)."""
    return lakedata.versions


@dataclass
class Root:
    """A dataset root for tests that run both on the S3 server and on local disk."""

    url: str
    options: dict[str, str]
    bucket: Bucket | None

    def open(self, create: bool = True) -> Any:
        from exporter.store.lake import LakeDataset, parse_location

        return LakeDataset.open(parse_location(self.url, self.options), create=create)


@pytest.fixture(params=["s3", "local"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Root:
    if request.param == "local":
        return Root(f"file://{tmp_path}/trail", {}, None)
    b = request.getfixturevalue("bucket")
    return Root(b.url(), b.options, b)


def run_sync(
    sim: Any, data_dir: str | Path, opts: list[str], key: str | None = None, **kwargs: Any
) -> Any:
    """One sync of the simulator into `data_dir`, unpaced, with fast retries (personal key
    unless `key`)."""
    from exporter.api.client import RetryPolicy
    from exporter.engine.sync import SyncConfig, sync

    kwargs.setdefault("max_rps", None)
    kwargs.setdefault("retry", RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05))
    kwargs.setdefault("commit_seconds", 0.2)
    config = SyncConfig(
        data_dir=data_dir,
        storage_options=opts,
        api_key=key or sim.personal_key,
        base_url=sim.base_url,
        **kwargs,
    )
    return sync(config)
