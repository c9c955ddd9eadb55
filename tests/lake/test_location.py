"""--data-dir parsing and --storage-option handling (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter import ConfigError, ExitCode
from exporter.lake import parse_location, parse_storage_options


@pytest.mark.parametrize(
    ("value", "scheme", "url"),
    [
        ("s3://bucket/pre/fix", "s3", "s3://bucket/pre/fix"),
        ("s3://bucket/pre/fix/", "s3", "s3://bucket/pre/fix"),
        ("s3://bucket", "s3", "s3://bucket"),
        ("s3a://bucket/p", "s3", "s3a://bucket/p"),
        ("gs://bucket/p", "gs", "gs://bucket/p"),
        ("az://container/p", "az", "az://container/p"),
        ("abfss://container/p", "az", "abfss://container/p"),
    ],
)
def test_object_store_urls(value: str, scheme: str, url: str) -> None:
    loc = parse_location(value)
    assert (loc.scheme, loc.url, loc.is_local) == (scheme, url, False)
    assert loc.table_uri("operation_versions") == f"{url}/operation_versions"


def test_local_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_location("data").path == tmp_path / "data"
    assert parse_location(f"file://{tmp_path}/x").path == tmp_path / "x"
    assert parse_location(tmp_path / "y").path == tmp_path / "y"
    # an odd but legal directory name, not a URL
    assert parse_location("runs:2025").path == tmp_path / "runs:2025"


@pytest.mark.parametrize(
    "value",
    [
        "ftp://host/x",
        "http://host/x",
        "https://host/x",
        "hdfs://nn/x",
        "s3:/bucket/x",
        "s3:bucket",
        "s3://",
        "s3://bucket/a/../b",
        "s3://key:secret@bucket/x",
        "az://container/p?sig=abc",
        "file://otherhost/x",
        "",
    ],
)
def test_refused(value: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_location(value)
    assert err.value.exit_code == ExitCode.USAGE == 2
    assert "secret" not in str(err.value) and "sig=abc" not in str(err.value)


def test_storage_options() -> None:
    opts = parse_storage_options(
        ["AWS_ENDPOINT_URL=http://127.0.0.1:9000", "AWS_REGION = eu-west-1"]
    )
    assert opts == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1"}
    for bad in (["AWS_REGION"], ["=x"], ["A B=c"], ["AWS_REGION=a", "AWS_REGION=b"]):
        with pytest.raises(ConfigError):
            parse_storage_options(bad)


@pytest.mark.parametrize(
    "item",
    [
        "AWS_SECRET_ACCESS_KEY=hunter2",
        "aws_access_key_id=AKIA",
        "AWS_SESSION_TOKEN=tok-123456",
        "azure_storage_account_key=key-123456",
    ],
)
def test_credentials_refused_as_options(item: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_storage_options([item])
    assert item.split("=")[1] not in str(err.value)
    assert "environment" in str(err.value)


def test_repr_hides_secrets() -> None:
    loc = parse_location(
        "s3://bucket/p",
        {"AWS_ENDPOINT_URL": "http://user:pw@127.0.0.1:9000", "SOME_PASSWORD": "pw2"},
    )
    text = repr(loc) + str(loc)
    assert "pw" not in text.replace("SOME_PASSWORD", "")
    assert "127.0.0.1:9000" in text


def test_parsing_loads_no_heavy_module() -> None:
    """The CLI parses --data-dir before anything else: that must not load pyarrow/deltalake."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from exporter.lake import parse_location, parse_storage_options\n"
        "parse_location('s3://bucket/p', ['AWS_REGION=x'])\n"
        "print(sorted(m for m in ('pyarrow', 'deltalake', 'obstore', 'boto3') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    assert out.stdout.strip() == "[]"
