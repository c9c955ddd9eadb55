"""Bad input against the S3 server: each a clear one-line error with its exit code, nothing
written. (Unknown URL schemes are in test_location.py.)"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter import ExitCode, OpsauditError, StorageError
from exporter.store.lake import LakeAccessError, LakeDataset, LakeUnreachableError, parse_location


def _open(url: str, options: dict[str, str], create: bool = True) -> LakeDataset:
    return LakeDataset.open(parse_location(url, options), create=create)


def _one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and len(text) < 400, text
    assert "testing-secret-value" not in text
    return text


def test_missing_bucket(bucket: Any) -> None:
    with pytest.raises(LakeAccessError) as err:
        _open("s3://no-such-bucket-here/trail", bucket.options)
    assert err.value.exit_code == ExitCode.USAGE
    assert "does not exist" in _one_line(err.value)


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


def test_wrong_credentials(bucket: Any, auth_enforced: None) -> None:
    with pytest.raises(LakeAccessError) as err:
        _open(bucket.url(), bucket.options)
    assert err.value.exit_code == ExitCode.USAGE
    assert "access denied" in _one_line(err.value)


def test_unreachable_endpoint(bucket: Any) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = {**bucket.options, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    started = time.monotonic()
    with pytest.raises(LakeUnreachableError) as err:
        _open(bucket.url(), options)
    assert time.monotonic() - started < 15
    assert err.value.exit_code == ExitCode.FATAL
    assert f"127.0.0.1:{port}" in _one_line(err.value)


def test_prefix_with_foreign_objects(bucket: Any) -> None:
    client = bucket.client()
    client.put_object(Bucket=bucket.name, Key="trail/something/else.csv", Body=b"a,b\n1,2\n")
    before = bucket.list_keys()
    with pytest.raises(StorageError) as err:
        _open(bucket.url(), bucket.options)
    assert err.value.exit_code == ExitCode.STATE
    assert "not an opsaudit dataset" in _one_line(err.value)
    assert bucket.list_keys() == before  # nothing written


def test_prefix_with_a_foreign_delta_table(bucket: Any) -> None:
    """Someone else's Delta table where our dataset would go: refused, untouched."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        bucket.url() + "/operation_versions",
        pa.table({"x": [1]}),
        storage_options={**bucket.options, "conditional_put": "etag"},
    )
    before = bucket.list_keys()
    with pytest.raises(StorageError, match="not an opsaudit dataset"):
        _open(bucket.url(), bucket.options)
    assert bucket.list_keys() == before


def test_corrupt_marker(bucket: Any) -> None:
    bucket.client().put_object(
        Bucket=bucket.name, Key="trail/_opsaudit/dataset.json", Body=b"{nope"
    )
    with pytest.raises(StorageError, match="not an opsaudit marker"):
        _open(bucket.url(), bucket.options)


def test_read_only_open_of_an_empty_prefix(bucket: Any, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no opsaudit dataset"):
        _open(bucket.url(), bucket.options, create=False)
    assert bucket.list_keys() == []
    with pytest.raises(OpsauditError):
        _open(f"file://{tmp_path}/nothing", {}, create=False)
