"""Bad input against the S3 server: each a clear one-line error with its exit code, nothing
written. (Unknown URL schemes are in test_location.py.)"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def test_wrong_credentials(bucket: Any, auth_enforced: None) -> None:
    with pytest.raises(LakeAccessError) as err:
        _open(bucket.url(), bucket.options)
    assert err.value.exit_code == ExitCode.USAGE
    assert "access denied" in _one_line(err.value)


def test_no_credentials(bucket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without keys the client asks the instance metadata service (moved to a closed port: off
    a cloud nothing answers there): that was said "unreachable" at the store's endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(LakeAccessError) as err:
        _open(bucket.url(), bucket.options)
    assert err.value.exit_code == ExitCode.USAGE
    assert _one_line(err.value) == (
        f"cannot read _opsaudit/dataset.json in {bucket.url()}: no credentials: none in the "
        "environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, instance role), and "
        "the instance metadata service gave none"
    )


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


def test_an_unreachable_endpoint_is_shown_without_its_query(bucket: Any) -> None:
    """The message showed the endpoint option whole, a token in its query string with it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}/?X-Token=S3cr3tT0ken#frag"
    with pytest.raises(LakeUnreachableError) as err:
        _open(bucket.url(), {**bucket.options, "AWS_ENDPOINT_URL": endpoint})
    assert str(err.value) == (
        f"cannot read _opsaudit/dataset.json in {bucket.url()}: the object store is unreachable "
        f"at http://127.0.0.1:{port} (network, DNS or endpoint setting)"
    )


class _Fails(BaseHTTPRequestHandler):
    """A blob store answering 500, its body quoting the request (its SAS query string)."""

    protocol_version = "HTTP/1.1"

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = f"<Error><Message>boom at {self.path}</Message></Error>".encode()
        self.send_response(500)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _any

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_storage_error_quotes_no_credential_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A storage error's first line went out as the server wrote it: an Azure SAS token the
    request carried, quoted back in the error body, was printed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fails)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    monkeypatch.setenv("AZURE_STORAGE_SAS_KEY", "sig=SASs1gnatureSECRET%3D&sv=2022-11-02")
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(StorageError) as err:
            _open("az://c/t", {"AZURE_ENDPOINT": endpoint, "AZURE_ALLOW_HTTP": "true"})
    finally:
        server.shutdown()
        server.server_close()
    said = str(err.value)
    assert said.startswith("cannot read _opsaudit/dataset.json in az://c/t: Generic ")
    assert "boom at /c/t/_opsaudit/dataset.json?***" in said
    assert "SASs1gnatureSECRET" not in said and "sv=2022" not in said


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


def test_check_of_an_empty_prefix_is_a_finding_as_of_an_empty_directory(
    bucket: Any, tmp_path: Path
) -> None:
    """`check` on a prefix no sync wrote was exit 6 ("no opsaudit dataset here"), on an empty
    local directory exit 8 (`stale_sync`): a monitor saw a different code for the same fact
    depending on where the data lives."""
    from click.testing import CliRunner

    from exporter.cli import cli

    (tmp_path / "empty").mkdir()
    url = bucket.url("never-synced")
    so = [a for o in bucket.storage_options() for a in ("--storage-option", o)]
    for where, extra in ((url, so), (str(tmp_path / "empty"), [])):
        prom = tmp_path / f"{len(extra)}.prom"
        args = ["check", "--data-dir", where, *extra, "--metrics-file", str(prom)]
        result = CliRunner().invoke(cli, args, prog_name="opsaudit")
        assert (result.exit_code, result.stdout) == (
            8,
            f"stale_sync: no sync has run in {where} yet: run `opsaudit sync`\n",
        ), result.output
        assert 'opsaudit_check_findings{check="stale_sync"} 1' in prom.read_text()
    assert bucket.list_keys() == []  # nothing written


def test_a_bad_option_value_is_a_usage_error_that_does_not_show_it(
    make_sim: Any, bucket: Any
) -> None:
    """deltalake read these values only when it opened a table: exit 6, the value in its
    message. Now each is refused before, naming the option alone."""
    from click.testing import CliRunner

    from exporter.cli import cli

    from .conftest import run_sync

    sim = make_sim(seed=3, projects=1, days=1, ops_per_project_per_day=20)
    assert run_sync(sim, bucket.url(), bucket.storage_options()).outcome == "ok"
    for option, says in (
        ("max_retries=abc", "not a whole number (e.g. 3)"),
        ("pool_max_idle_per_host=abc", "not a whole number (e.g. 3)"),
        ("retry_timeout=abc", "not a duration: use a number and a unit (30s, 500ms, 2m)"),
        ("http2_only=maybe", "not a boolean: use true or false"),
        ("AWS_SSE_BUCKET_KEY_ENABLED=maybe", "not a boolean: use true or false"),
        ("AWS_SERVER_SIDE_ENCRYPTION=bogus", "not one of AES256, aws:kms, aws:kms:dsse, sse-c"),
        ("AWS_CHECKSUM_ALGORITHM=bogus", "not one of sha256"),
        # Its first line was quoted by obstore's refusal, past the redaction of the whole value.
        ("user_agent=s3cr3t\nmore", "its value holds a control character"),
    ):
        args = ["status", "--data-dir", bucket.url()]
        for item in [*bucket.storage_options(), option]:
            args += ["--storage-option", item]
        result = CliRunner().invoke(cli, args, prog_name="opsaudit")
        assert (option, result.exit_code, result.stdout) == (option, 2, "")
        assert result.stderr == f"Error: --storage-option {option.split('=')[0]}: {says}\n"


def test_every_spelling_a_typed_option_takes_works_against_the_server(
    make_sim: Any, bucket: Any
) -> None:
    """The spellings parse_storage_options lets through are the ones deltalake and obstore take:
    a sync with them commits, and its table reads back."""
    from .conftest import run_sync

    typed = [
        "max_retries=2",
        "pool_max_idle_per_host=4",
        "timeout=1m 30s",
        "connect_timeout=2.5s",
        "pool_idle_timeout=90sec",
        "retry_timeout=1min",
        "http1_only=Y",
        "AWS_ALLOW_HTTP=on",
        "AWS_SSE_BUCKET_KEY_ENABLED=no",
        "AWS_SERVER_SIDE_ENCRYPTION=AES256",
        "AWS_CHECKSUM_ALGORITHM=SHA256",
    ]
    options = [*bucket.storage_options()[:1], *typed]  # its AWS_ALLOW_HTTP spelt "on" here
    sim = make_sim(seed=3, projects=1, days=1, ops_per_project_per_day=20)
    summary = run_sync(sim, bucket.url(), options)
    assert summary.outcome == "ok"
    dataset = _open(bucket.url(), dict(o.split("=", 1) for o in options), create=False)
    table = dataset.table("operation_versions")
    assert table is not None
    assert table.to_pyarrow_table().num_rows == len(sim.ground_truth())


def test_a_prefix_inside_a_delta_log_is_refused_before_anything_is_written(
    make_sim: Any, bucket: Any
) -> None:
    """`s3://b/t/_delta_log`: the first sync exited 6 "cannot record the superseded versions
    ...: No files in log segment", every later one "Invalid table version: 0", `status` said
    "no dataset yet", and the marker and the lease stayed to delete by hand."""
    from click.testing import CliRunner

    from exporter.cli import cli

    sim = make_sim(seed=3, projects=1, days=1, ops_per_project_per_day=5)
    url = bucket.url("t/_delta_log")
    options = [a for o in bucket.storage_options() for a in ("--storage-option", o)]
    for command in (["sync", "--base-url", sim.base_url], ["status"]):
        result = CliRunner().invoke(
            cli, [*command, "--data-dir", url, *options], env={"NEON_API_KEY": sim.personal_key}
        )
        assert result.exit_code == ExitCode.USAGE, result.output
        assert result.output.endswith(  # sync's option check says "Invalid value for ..."
            f"{url!r}: a '_delta_log' segment in the prefix: that is a Delta table's log, and "
            "this dataset's own Delta tables cannot live in one; give a prefix without it "
            f"(e.g. s3://{bucket.name}/opsaudit)\n"
        )
    assert bucket.list_keys() == []
