"""`opsaudit doctor` of a dataset on object storage, against the moto S3 server and the simulator:
a healthy dataset (every finding ok, nothing written), a damaged Delta commit file, the lease
held and left by a killed holder, an empty prefix, and the storage refused (no credentials, no
such bucket, access denied, unreachable endpoint) with no secret in the output."""

from __future__ import annotations

import datetime as dt
import json
import socket
from typing import Any

import pytest
from click.testing import CliRunner, Result

from exporter.analytics.format import jsonable
from exporter.cli import cli
from exporter.ops.doctor import run_doctor
from exporter.store.lake import open_dataset
from exporter.store.state import FORMAT_VERSION

from .conftest import AZURITE_KEY, Bucket, run_sync

SECRET = "testing-secret-value"  # conftest's AWS_SECRET_ACCESS_KEY
LOG = "operation_versions/_delta_log/"


@pytest.fixture
def sim(make_sim: Any) -> Any:
    return make_sim(seed=5, projects=2, days=1, ops_per_project_per_day=30)


def doctor(sim: Any, bucket: Any, *args: str, url: str | None = None) -> Result:
    options = [x for o in bucket.storage_options() for x in ("--storage-option", o)]
    return CliRunner().invoke(
        cli,
        ["doctor", "--data-dir", url or bucket.url(), *options, "--base-url", sim.base_url, *args],
        prog_name="opsaudit",
        env={"NEON_API_KEY": sim.personal_key},
    )


def api_lines(sim: Any) -> list[str]:
    orgs = ", ".join(f"{o['name']} ({o['id']})" for o in sim.world.orgs)
    return [
        f"ok    base_url: {sim.base_url}/ (plain http on loopback)",
        f"ok    key: a personal key; it sees {len(sim.world.orgs)} organization(s): {orgs}",
        f"ok    discovery: {len(sim.project_ids())} project(s) in scope",
    ]


def objects(bucket: Bucket) -> dict[str, str]:
    """Every object of the bucket with its ETag: what doctor must leave as it found it."""
    pages = bucket.client().get_paginator("list_objects_v2").paginate(Bucket=bucket.name)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def synced(sim: Any, bucket: Bucket) -> Any:
    result = run_sync(sim, bucket.url(), bucket.storage_options())
    assert result.outcome == "ok"
    return result


def test_a_healthy_dataset_is_ok_in_every_finding_and_nothing_is_written(
    sim: Any, bucket: Bucket
) -> None:
    synced(sim, bucket)
    ds = open_dataset(bucket.url(), bucket.storage_options())
    lease = ds.lease().read()
    assert lease is not None and lease.released and lease.run_id
    [run] = ds.snapshot("sync_runs").to_table().to_pylist()  # type: ignore[union-attr]
    batch = ds.committed_version()
    before = objects(bucket)
    result = doctor(sim, bucket)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        *api_lines(sim),
        f"ok    storage: {bucket.url()} is an opsaudit dataset, readable with these "
        "credentials (write access is not tested: doctor writes nothing)",
        f"ok    lease: free (released by {lease.holder}, run {lease.run_id})",
        "ok    tables: the Delta logs of 9 table(s) are readable",
        f"ok    state: batch {batch}: state format {FORMAT_VERSION} (this opsaudit reads "
        f"{FORMAT_VERSION})",
        f"ok    runs: last run {jsonable(run['finished_at'])}: ok; 1 successful run(s) in all",
    ]
    assert objects(bucket) == before  # no lease taken, no clock probe, no state pruned
    assert SECRET not in result.output and sim.personal_key not in result.output
    as_json = doctor(sim, bucket, "--format", "json")
    body = json.loads(as_json.stdout)
    assert as_json.exit_code == 0 and body["ok"] is True
    assert [f["level"] for f in body["findings"]] == ["ok"] * 8


def test_a_damaged_delta_commit_file_is_an_error_naming_it(sim: Any, bucket: Bucket) -> None:
    synced(sim, bucket)
    keys = sorted(k for k in objects(bucket) if k.startswith(f"trail/{LOG}"))
    last = keys[-1].removeprefix("trail/")
    bucket.client().put_object(
        Bucket=bucket.name, Key=f"trail/{last}", Body=b'{"commitInfo": {}}\n{"add": {"pa'
    )
    result = doctor(sim, bucket)
    assert result.exit_code == 8, result.output
    assert result.stdout.splitlines()[5:] == [
        f"error tables: {bucket.url()}: table operation_versions cannot be read: its log file "
        f"{last} is not a Delta commit (Kernel error: Json error: Truncated record whilst "
        "reading string); opsaudit writes each commit file whole, so something else wrote or "
        f"cut it. Fix: restore {last} from the bucket's object versions or a backup; opsaudit "
        "cannot rebuild operation_versions",
        "error state: not read: the committed batch, which names the state object, is in the "
        "log of operation_versions (above)",
    ]


def test_a_damaged_commit_of_a_table_written_from_the_state(sim: Any, bucket: Bucket) -> None:
    """projects holds nothing the state does not: named, its fix the next sync; the state and
    the runs are still read."""
    synced(sim, bucket)
    [last] = [k for k in objects(bucket) if k.startswith("trail/projects/_delta_log/0")][-1:]
    last = last.removeprefix("trail/")
    bucket.client().put_object(Bucket=bucket.name, Key=f"trail/{last}", Body=b"not json\n")
    result = doctor(sim, bucket)
    assert result.exit_code == 8, result.output
    lines = result.stdout.splitlines()
    assert lines[5].startswith(
        f"error tables: {bucket.url()}: table projects cannot be read: its log file {last} is "
        "not a Delta commit ("
    )
    assert lines[5].endswith(
        f"so something else wrote or cut it. Fix: move {last} out of projects/_delta_log/ (keep "
        "it: it shows what wrote it), then run `opsaudit sync`; projects holds nothing the state "
        "does not: the next sync writes it again"
    )
    assert [line.split(":", 1)[0] for line in lines[6:]] == ["ok    state", "ok    runs"]


def test_a_held_lease_and_one_left_by_a_killed_holder(sim: Any, bucket: Bucket) -> None:
    """Live, expired 2 min ago by this machine's clock (within a reader's allowance of 10 min
    for its clock to run ahead of the store's: it was shown "held ... running now", and an
    operator after a killed run waited), and expired 20 min ago; doctor writes nothing."""
    synced(sim, bucket)
    ds = open_dataset(bucket.url(), bucket.storage_options())
    held = ds.lease(holder="other-host:4242")
    held.acquire()
    info = ds.lease().read()
    assert info is not None
    before = objects(bucket)
    result = doctor(sim, bucket)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[4] == (
        "warn  lease: held by other-host:4242: a sync or compaction is running now (its lease "
        f"runs to {jsonable(info.expires_at())} unless renewed) Fix: nothing to do unless it "
        "never ends (a killed holder's lease expires after 120 s)"
    )

    def lease_line(later: dt.datetime) -> str:
        report = run_doctor(
            bucket.url(),
            api_key=sim.personal_key,
            base_url=sim.base_url,
            storage_options=bucket.storage_options(),
            now=later,
        )
        [line] = [f.line() for f in report.findings if f.check == "lease"]
        return line

    expired = jsonable(info.expires_at())  # last renewal + 120 s + the store's grace of 5 s
    assert lease_line(info.expires_at() + dt.timedelta(minutes=2)) == (
        "warn  lease: held by other-host:4242 and not renewed for 245 s: it expired at "
        f"{expired} by this machine's clock, which may differ from the store's by up to 600 s "
        "(the store's decides) Fix: nothing to wait for if that sync or compaction was killed: "
        f"the next sync takes the lease over once the store's clock passes {expired} and "
        "records that run as killed (until then it exits 4; --wait queues it)"
    )
    # Its holder stopped renewing: expired past a reader's allowance, as a killed one's is.
    assert lease_line(info.expires_at() + dt.timedelta(minutes=20)) == (
        "warn  lease: left by other-host:4242, never released (expired at "
        f"{expired}): that sync or compaction was killed Fix: nothing to "
        "do: the next sync takes the lease over and records that run as killed"
    )
    assert objects(bucket) == before
    held.release()


def test_an_empty_prefix_is_a_dataset_to_be(sim: Any, bucket: Bucket) -> None:
    result = doctor(sim, bucket)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[3:] == [
        f"ok    storage: {bucket.url()} is readable and holds no dataset yet; the first sync "
        "creates it (write access is not tested: doctor writes nothing)",
        "ok    lease: free (no sync has taken it yet)",
        "ok    state: no state yet (a new dataset)",
        "warn  runs: no sync has run yet Fix: run `opsaudit sync`",
    ]
    assert objects(bucket) == {}


def _closed_port() -> int:
    with socket.socket() as s:  # free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CREDENTIALS = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, instance role"


def test_no_credentials(sim: Any, bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without keys the client asks the instance metadata service (here: moved to a closed
    port, as off a cloud nothing answers there): that was "unreachable at" the endpoint."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    result = doctor(sim, bucket)
    assert result.exit_code == 8, result.output
    assert result.stdout.splitlines()[3:] == [
        f"error storage: cannot read _opsaudit/dataset.json in {bucket.url()}: no credentials: "
        f"none in the environment ({CREDENTIALS}), and the instance metadata service gave none"
    ]


def test_no_such_bucket_denied_and_unreachable(
    sim: Any, bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced(sim, bucket)
    url = "s3://no-such-bucket-here/trail"
    missing = doctor(sim, bucket, url=url)
    assert missing.exit_code == 8, missing.output
    assert missing.stdout.splitlines()[3:] == [
        f"error storage: cannot list {url}: the bucket 'no-such-bucket-here' does not exist "
        "(create it first; opsaudit never creates buckets)"
    ]
    port = _closed_port()
    monkeypatch.setitem(bucket.options, "AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    away = doctor(sim, bucket)
    assert away.exit_code == 8, away.output
    assert away.stdout.splitlines()[3:] == [
        f"error storage: cannot read _opsaudit/dataset.json in {bucket.url()}: the object store "
        f"is unreachable at http://127.0.0.1:{port} (network, DNS or endpoint setting) Fix: "
        "check the endpoint (--storage-option or the environment), DNS, the network and any "
        "proxy"
    ]
    for result in (missing, away):
        assert SECRET not in result.output


def test_access_denied(sim: Any, bucket: Bucket, auth_enforced: None) -> None:
    result = doctor(sim, bucket)
    assert result.exit_code == 8, result.output
    assert result.stdout.splitlines()[3:] == [
        f"error storage: cannot read _opsaudit/dataset.json in {bucket.url()}: access denied; "
        f"check the credentials in the environment ({CREDENTIALS}) and the bucket's or "
        "container's policy"
    ]
    assert SECRET not in result.output and "testing" not in result.output


def test_storage_options_on_a_local_directory_are_a_usage_error(sim: Any, tmp_path: Any) -> None:
    result = CliRunner().invoke(
        cli,
        ["doctor", "--data-dir", str(tmp_path), "--storage-option", "AWS_REGION=x"],
        env={"NEON_API_KEY": sim.personal_key},
    )
    assert result.exit_code == 2, result.output
    assert "--storage-option applies to object storage" in result.output


def test_a_healthy_dataset_on_azure(sim: Any, container: Any) -> None:
    """Azurite: the account key in the environment only, the rest as --storage-option."""
    assert run_sync(sim, container.url(), container.storage_options()).outcome == "ok"
    result = doctor(sim, container)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        *(f"ok    {check}" for check in ("base_url", "key", "discovery", "storage", "lease")),
        *(f"ok    {check}" for check in ("tables", "state", "runs")),
    ]
    assert lines[3] == (
        f"ok    storage: {container.url()} is an opsaudit dataset, readable with these "
        "credentials (write access is not tested: doctor writes nothing)"
    )
    assert lines[5] == "ok    tables: the Delta logs of 9 table(s) are readable"
    assert AZURITE_KEY not in result.output
