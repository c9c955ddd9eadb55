"""--data-dir parsing and --storage-option handling (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter import ConfigError, ExitCode
from exporter.store.lake import parse_location, parse_storage_options
from exporter.store.lake.location import check_environment


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


@pytest.mark.parametrize(
    "value",
    ["s3://b/t/_delta_log", "s3://b/t/_delta_log/", "gs://b/_delta_log/x", "s3://b/t/%5Fdelta_log"],
)
def test_a_prefix_inside_a_delta_log_is_refused(value: str) -> None:
    """A `_delta_log` segment put the dataset's Delta tables inside a table's log: the first
    sync exited 6 ("No files in log segment"), every later one too, its objects left behind."""
    with pytest.raises(ConfigError) as err:
        parse_location(value)
    scheme, bucket = value.split("/")[0], value.split("/")[2]
    assert str(err.value) == (
        f"--data-dir {value!r}: a '_delta_log' segment in the prefix: that is a Delta table's "
        "log, and this dataset's own Delta tables cannot live in one; give a prefix without it "
        f"(e.g. {scheme}//{bucket}/opsaudit)"
    )
    assert err.value.exit_code == ExitCode.USAGE


def test_a_prefix_is_its_decoded_key() -> None:
    """deltalake and obstore decode a prefix's %-escapes: `pct%20x` writes under `pct x`."""
    same = ["s3://b/pct%20x", "s3://b/pct x", "s3a://b/pct%20x/", "s3://b/pct%20%78"]
    assert {parse_location(v).identity for v in same} == {"s3://b/pct x"}
    assert parse_location("s3://b/a%2Fb").identity == parse_location("s3://b/a/b").identity
    assert parse_location("s3://b/q_delta_log").identity == "s3://b/q_delta_log"  # not a log
    for value, says in [
        ("s3://b/a%2F%2Fb", "empty, '.' or '..' path segment in the prefix"),
        ("s3://b/x/%2E%2E/y", "empty, '.' or '..' path segment in the prefix"),
        (
            "s3://b/x%FF",
            "a %-escape in the prefix is not UTF-8 once decoded; write the prefix's characters "
            "as they are or escape their UTF-8 bytes",
        ),
    ]:
        with pytest.raises(ConfigError) as err:
            parse_location(value)
        assert str(err.value) == f"--data-dir {value!r}: {says}"


def test_a_local_directory_named_delta_log_is_a_plain_directory(tmp_path: Path) -> None:
    """Local datasets are Hive Parquet, not Delta tables: the name means nothing there."""
    assert parse_location(str(tmp_path / "_delta_log")).path == tmp_path / "_delta_log"


_CREDENTIALS = "credentials in the URL are not accepted; use the environment or profile chain"
_UNSUPPORTED = (
    "unsupported scheme https://; use a local path, file://, s3://bucket/prefix, "
    "gs://bucket/prefix or az://container/prefix"
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (
            "s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY@bucket/prefix",
            f"'s3://***@bucket/prefix': {_CREDENTIALS}",
        ),
        ("gs://tok#en@bucket/p", f"'gs://***@bucket/p': {_CREDENTIALS}"),
        ("az://acct:k?ey@container/p?sig=x", f"'az://***@container/p': {_CREDENTIALS}"),
        (
            "s3://AKIA:secretkey/with/slashes",
            "'s3://***': a bucket name holds no ':' (credentials in the URL are not accepted, "
            "an endpoint goes in --storage-option)",
        ),
    ],
)
def test_credentials_holding_a_slash_or_a_hash_are_refused_unshown(value: str, shown: str) -> None:
    """A secret key holding '/' (or '#') ended urlsplit's netloc before its '@': the URL passed
    the credentials check and was printed whole where the client refused it."""
    with pytest.raises(ConfigError) as err:
        parse_location(value)
    assert str(err.value) == f"--data-dir {shown}"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (
            "https://acct.blob.core.windows.net/c/p?sv=2022-11-02&sig=SECRETSIG",
            f"'https://acct.blob.core.windows.net/c/p': {_UNSUPPORTED}",
        ),
        ("https://user:pa/ss@host/x#frag", f"'https://***@host/x': {_UNSUPPORTED}"),
        (
            "s3:bucket/p?X-Amz-Signature=SECRETSIG",
            "'s3:bucket/p': malformed URL; write s3://bucket/prefix",
        ),
    ],
)
def test_a_refused_url_is_shown_without_its_query_or_user_info(value: str, shown: str) -> None:
    """An unsupported scheme or a malformed URL was shown whole, its SAS or presigned token
    with it (only user info was hidden)."""
    with pytest.raises(ConfigError) as err:
        parse_location(value)
    assert str(err.value) == f"--data-dir {shown}"


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
        "AWS_SECRET_ACCESS_KEY=hunter2-0001",
        "aws_access_key_id=AKIA-0001",
        "AWS_SESSION_TOKEN=tok-123456",
        "azure_storage_account_key=key-123456",
        # Issue 19: aliases a deny-list of names missed were accepted, used and shown by repr.
        "AZURE_STORAGE_MASTER_KEY=key-234567",
        "MASTER_KEY=key-345678",
        "AWS_SSE_CUSTOMER_KEY_BASE64=c2VjcmV0LWtleQ",
        "azure_storage_sas_key=sv-2024-sig-1",
        "google_service_account_key={json-key-1}",
        "AZURE_FABRIC_TOKEN_SERVICE_URL=https://tok.example/1",
        "some_new_secret_option=value-456789",
    ],
)
def test_only_known_non_secret_options_are_accepted(item: str) -> None:
    key, value = item.split("=", 1)
    with pytest.raises(ConfigError) as err:
        parse_storage_options([item])
    assert err.value.exit_code == ExitCode.USAGE
    message = str(err.value)
    assert message.startswith(f"--storage-option {key}: not an accepted option. ")
    assert value not in message
    assert "environment or profile chain" in message


def test_every_documented_option_is_accepted() -> None:
    given = [
        "AWS_ENDPOINT_URL=http://127.0.0.1:9000",
        "aws_region=eu-west-1",
        "AWS_ALLOW_HTTP=true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false",
        "conditional_put=etag",
        "timeout=30s",
        "AZURE_STORAGE_ACCOUNT_NAME=acct",
        "AZURE_ENDPOINT=http://127.0.0.1:10000/acct",
        "GOOGLE_ALLOW_HTTP=true",
    ]
    assert parse_storage_options(given) == dict(item.split("=", 1) for item in given)


def test_an_option_without_a_key_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_storage_options(["hunter2-secret"])
    assert str(err.value) == (
        "--storage-option without KEY=: expected KEY=VALUE, "
        "e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000"
    )


def test_repr_shows_no_option_value() -> None:
    loc = parse_location(
        "s3://bucket/p",
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000/tok", "AWS_REGION": "eu-west-9"},
    )
    expected = "Location('s3://bucket/p', options=['AWS_ENDPOINT_URL', 'AWS_REGION'])"
    assert (repr(loc), str(loc)) == (expected, expected)


def test_parsing_loads_no_heavy_module() -> None:
    """The CLI parses --data-dir before anything else: that must not load pyarrow/deltalake."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from exporter.store.lake import parse_location, parse_storage_options\n"
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


_NOT_INTEGER = "not a whole number (e.g. 3)"
_NOT_DURATION = "not a duration: use a number and a unit (30s, 500ms, 2m)"
_NOT_BOOLEAN = "not a boolean: use true or false"
_NOT_ENDPOINT = (
    "not an http(s) URL with a host, a port from 1 to 65535 if any, and no user info "
    "(e.g. http://127.0.0.1:9000)"
)


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("max_retries=abc", _NOT_INTEGER),
        ("max_retries=-1", _NOT_INTEGER),
        ("AWS_MAX_RETRIES=3.5", _NOT_INTEGER),
        ("pool_max_idle_per_host=abc", _NOT_INTEGER),
        ("pool_max_idle_per_host=18446744073709551616", _NOT_INTEGER),
        ("retry_timeout=abc", _NOT_DURATION),
        ("retry_timeout=30", _NOT_DURATION),  # deltalake wants a unit
        ("timeout=1S", _NOT_DURATION),
        ("connect_timeout=.5s", _NOT_DURATION),
        ("pool_idle_timeout=1h30", _NOT_DURATION),
        ("AWS_TIMEOUT=99999999999999h", _NOT_DURATION),
        ("timeout=0s", "no time at all, every request would fail: give a duration above 0 (30s)"),
        ("http2_only=maybe", _NOT_BOOLEAN),
        ("allow_http=si", _NOT_BOOLEAN),
        ("AWS_SSE_BUCKET_KEY_ENABLED=maybe", _NOT_BOOLEAN),
        ("aws_imdsv1_fallback=maybe", _NOT_BOOLEAN),
        ("AZURE_USE_EMULATOR=maybe", _NOT_BOOLEAN),
        ("AWS_SERVER_SIDE_ENCRYPTION=aes256", "not one of AES256, aws:kms, aws:kms:dsse, sse-c"),
        ("aws_server_side_encryption=s3cr3t", "not one of AES256, aws:kms, aws:kms:dsse, sse-c"),
        ("AWS_CHECKSUM_ALGORITHM=crc32c", "not one of sha256"),
        # object_store panicked on these (a traceback, exit 1)
        ("AWS_ENDPOINT_URL=minio:9000", _NOT_ENDPOINT),
        ("AWS_ENDPOINT_URL=http://127.0.0.1:90000", _NOT_ENDPOINT),
        ("aws_endpoint=http://u:p/w@host", _NOT_ENDPOINT),
        ("AZURE_ENDPOINT=http://127.0.0.1:0", _NOT_ENDPOINT),
        ("AZURE_STORAGE_ENDPOINT=http://h ost:9", _NOT_ENDPOINT),
        ("AWS_METADATA_ENDPOINT=http://:80", _NOT_ENDPOINT),
        ("azure_msi_endpoint=ftp://host", _NOT_ENDPOINT),
    ],
)
def test_a_bad_value_of_a_typed_option_names_the_option_not_the_value(item: str, says: str) -> None:
    key = item.split("=", 1)[0]
    with pytest.raises(ConfigError) as err:
        parse_storage_options([item])
    assert err.value.exit_code == ExitCode.USAGE
    assert str(err.value) == f"--storage-option {key}: {says}"


def test_typed_options_take_every_spelling_deltalake_takes() -> None:
    given = [
        "max_retries=0",
        "pool_max_idle_per_host=16",
        "timeout=1.5s",
        "connect_timeout=500ms",
        "pool_idle_timeout=1m 30s",
        "retry_timeout=0",
        "AWS_ALLOW_HTTP=Y",
        "http1_only=off",
        "AWS_SSE_BUCKET_KEY_ENABLED=1",
        "AWS_SERVER_SIDE_ENCRYPTION=aws:kms:dsse",
        "aws_checksum_algorithm=SHA256",
        "AWS_REGION=maybe",  # a string: any value
    ]
    assert parse_storage_options(given) == dict(item.split("=", 1) for item in given)


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        ("status", "AWS_ENDPOINT_URL", "minio:9000"),
        ("check", "AWS_ENDPOINT", "minio:9000"),
        ("sync", "AWS_ENDPOINT_URL", "http://"),
        ("compact", "AWS_ENDPOINT_URL", ""),
        ("status", "AWS_ENDPOINT_URL", "http://user:s3cr3tvalue@minio:9000"),
        ("status", "AWS_ENDPOINT_URL_S3", "minio:9000"),  # the SDK's S3-only endpoint
    ],
)
def test_a_bad_endpoint_in_the_environment_names_the_variable_not_the_value(
    monkeypatch: pytest.MonkeyPatch, command: str, variable: str, value: str
) -> None:
    """An endpoint from the environment that is not a URL (`minio:9000`, no scheme) made
    delta-rs or obstore panic: 'unexpected error' (exit 5), a bug. As for --storage-option
    endpoint=...: exit 2 naming the variable, never its value, before any request (there is no
    server here; the API's base URL refuses connections)."""
    from click.testing import CliRunner

    from exporter.cli import cli

    from .conftest import set_aws_env

    set_aws_env(monkeypatch, "unused")
    monkeypatch.setenv(variable, value)
    env = {"NEON_API_KEY": "napi_key_never_sent", "OPSAUDIT_BASE_URL": "http://127.0.0.1:9/"}
    result = CliRunner().invoke(cli, [command, "--data-dir", "s3://bucket/trail"], env=env)
    assert (result.exit_code, result.output) == (
        2,
        f"Error: the environment's {variable}: {_NOT_ENDPOINT}\n",
    )
    # An endpoint given as an option wins over the environment's, as in delta-rs.
    given = parse_location("s3://bucket/trail", ["AWS_ENDPOINT_URL=http://127.0.0.1:9000"])
    check_environment(given, {variable: value})
