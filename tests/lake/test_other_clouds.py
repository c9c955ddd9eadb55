"""opsaudit on Azure Blob Storage: sync, incremental sync, the lease and `query` against Azurite.

Azurite (Microsoft's emulator, an npm package that .ci/run installs) runs on 127.0.0.1 as a
subprocess (conftest.py `azurite`); the simulator is the platform. The account key is only in
the environment (AZURE_STORAGE_ACCOUNT_KEY), as for a real account: the command line carries
the account name, the endpoint and AZURE_ALLOW_HTTP. Nothing inside opsaudit is mocked; every
check reads the Delta table back and compares it with the simulator's ground truth.

GCS is not synced here: no GCS emulator available to this project honours conditional writes
(docs/lake-design.md, "Other object stores"); the last test only pins the request side of a
conditional update on gs://.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from exporter import ExitCode, LockHeldError

from . import test_lease, test_objects, test_tables
from .conftest import Container, Root, run_sync
from .test_sync_lake import _cli, _cli_env, _so, _start_sync, assert_exact, table_rows


@pytest.fixture
def root(container: Container) -> Root:
    """The dataset root of the backend-neutral tests below: a fresh Azurite container."""
    return Root(container.url(), container.options, None)


# The backend-neutral tests (they take `root`) run here on Azure as they run on S3 and local
# disk: If-None-Match / If-Match puts, the lease (race, expiry, renewal, fencing, --wait, a
# SIGKILLed holder) and the exactly-once commit (two writers at one batch: one wins).
test_conditional_put_semantics = test_objects.test_conditional_put_semantics
test_race_one_taker_wins = test_lease.test_race_one_taker_wins
test_live_lease_not_stolen_expired_lease_taken = (
    test_lease.test_live_lease_not_stolen_expired_lease_taken
)
test_renewal_keeps_the_lease = test_lease.test_renewal_keeps_the_lease
test_fencing_without_renewal = test_lease.test_fencing_without_renewal
test_wait_queues_behind_the_holder = test_lease.test_wait_queues_behind_the_holder
test_holder_killed_with_sigkill_loses_the_lease = (
    test_lease.test_holder_killed_with_sigkill_loses_the_lease
)
test_commit_and_txn_readback = test_tables.test_commit_and_txn_readback
test_commit_refuses_stale_or_gapped_versions = (
    test_tables.test_commit_refuses_stale_or_gapped_versions
)
test_two_writers_same_batch_one_commit_wins = (
    test_tables.test_two_writers_same_batch_one_commit_wins
)
test_replace_small_tables = test_tables.test_replace_small_tables
test_compact_and_vacuum_keep_readers_safe = test_tables.test_compact_and_vacuum_keep_readers_safe
test_state_in_wal_mode_is_uploaded_whole = test_tables.test_state_in_wal_mode_is_uploaded_whole
test_readers_never_delete_a_writers_next_state = (
    test_tables.test_readers_never_delete_a_writers_next_state
)


def test_sync_incremental_and_query_on_azure(make_sim: Any, container: Container) -> None:
    """Backfill then an incremental sync into az://container/prefix, each exact against the
    ground truth; `opsaudit query --data-dir az://...` agrees row for row."""
    sim = make_sim(seed=21, projects=3, days=2, ops_per_project_per_day=300)
    url, opts = container.url("audit/org-1"), container.storage_options()
    first = run_sync(sim, url, opts)
    assert first.outcome == "ok", first.error
    assert first.new_operations > 0
    assert_exact(sim, table_rows(url, opts))
    sim.advance(3600)  # new operations and in-place changes of open ones
    second = run_sync(sim, url, opts)
    assert second.outcome == "ok", second.error
    assert second.new_operations > 0
    rows = table_rows(url, opts)
    assert_exact(sim, rows)
    assert run_sync(sim, url, opts).new_operations == 0  # a no-change run adds nothing
    assert len(table_rows(url, opts)) == len(rows)

    env = _cli_env(sim)
    sql = "SELECT id, version FROM operation_versions ORDER BY id, version"
    done = _cli(["query", "--data-dir", url, *_so(container), "--format", "json", sql], env)
    assert done.returncode == 0, done.stderr
    assert [(r["id"], r["version"]) for r in json.loads(done.stdout)] == sorted(
        (r["id"], r["version"]) for r in rows
    )
    latest = "SELECT count(*) AS n FROM operations"
    done = _cli(["query", "--data-dir", url, *_so(container), "--format", "json", latest], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": len(sim.ground_truth(None))}]


def _holder(url: str, opts: list[str]) -> str | None:
    from exporter.store.lake import LakeDataset, parse_location

    try:
        info = LakeDataset.open(parse_location(url, opts)).lease().read()
    except Exception:
        return None
    return None if info is None or info.released else info.holder


def test_a_second_sync_while_the_lease_is_held_exits_4(make_sim: Any, container: Container) -> None:
    """`opsaudit sync` (its own process) holds the lease on az://...; a second sync, in this
    process and on the command line, stops with LockHeldError / exit 4; the
    holder finishes with exit 0 and the table is exact."""
    from exporter.simulator import Faults

    sim = make_sim(seed=22, projects=3, days=2, ops_per_project_per_day=1500)
    # Every API answer slowed: the holder outlasts the two refusals below by seconds.
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.3, seed=2)
    url, opts = container.url("leased"), container.storage_options()
    env = _cli_env(sim)
    holder = _start_sync(sim, url, container)
    try:
        deadline = time.monotonic() + 30
        while not (_holder(url, opts) or "").endswith(f":{holder.pid}"):
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the first sync never took the lease"
            time.sleep(0.05)
        with pytest.raises(LockHeldError) as err:
            run_sync(sim, url, opts)
        assert err.value.exit_code == ExitCode.LOCKED == 4
        assert f":{holder.pid}" in str(err.value)
        second = _cli(["sync", "--data-dir", url, *_so(container), "--max-rps", "0"], env)
        assert second.returncode == 4, (second.returncode, second.stderr)
        assert "holds the dataset" in second.stderr, second.stderr
        assert holder.poll() is None, "the holder ended before the second syncs were refused"
        _, errors = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    assert holder.returncode == 0, errors
    assert _holder(url, opts) is None  # released
    sim.faults = Faults()
    assert_exact(sim, table_rows(url, opts))


def test_missing_container_is_a_configuration_error(make_sim: Any, container: Container) -> None:
    sim = make_sim(seed=23, projects=1, days=1, ops_per_project_per_day=10)
    url = f"az://nope-{container.name}/trail"
    done = _cli(
        ["sync", "--data-dir", url, *_so(container), "--max-rps", "0"], _cli_env(sim), timeout=60
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "does not exist" in done.stderr, done.stderr


def test_a_bad_key_names_azures_settings_and_shows_nothing_of_it(
    make_sim: Any, container: Container
) -> None:
    """A key Azure cannot decode was blamed on --storage-option (it came from the environment)
    and its bad character told by code and offset ("Invalid symbol 45, offset 3"); a key
    Azurite refuses got AWS's advice (AWS_ACCESS_KEY_ID, AWS_PROFILE)."""
    import base64

    sim = make_sim(seed=24, projects=1, days=1, ops_per_project_per_day=10)
    args = ["sync", "--data-dir", container.url("bad-key"), *_so(container), "--max-rps", "0"]
    env = _cli_env(sim)
    env["AZURE_STORAGE_ACCOUNT_KEY"] = "abc-SECRET"
    undecodable = _cli(args, env, timeout=60)
    assert undecodable.returncode == 2, undecodable.stderr
    error = undecodable.stderr.splitlines()[-1]
    assert "environment's AZURE_*" in error and "Invalid Access Key" in error, error
    # (the container's random hex name may hold any digits: the code is looked for with its
    # word)
    assert not any(s in error for s in ("SECRET", "abc-", "symbol 45", "offset")), error
    env["AZURE_STORAGE_ACCOUNT_KEY"] = base64.b64encode(b"x" * 64).decode()
    refused = _cli(args, env, timeout=60)
    assert refused.returncode == 2, refused.stderr
    error = refused.stderr.splitlines()[-1]
    assert "access denied" in error and "AZURE_STORAGE_ACCOUNT_KEY" in error, error
    assert "AWS_" not in error and env["AZURE_STORAGE_ACCOUNT_KEY"] not in refused.stderr


def test_gcs_if_match_names_the_generation(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GCS emulator honours conditional writes (module docstring), so this only pins the
    request side: object_store's GCS update matches the generation and refuses an ETag alone
    ("Version required for conditional update"), which made every If-Match put on gs:// (lease
    renewal, take-over, release) fail before it was sent. It now goes out, here to a closed
    loopback port: unreachable (exit 5), not refused."""
    import socket

    from exporter.store.lake import parse_location
    from exporter.store.lake.objects import LakeUnreachableError, RemoteObjects

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    account = tmp_path / "gcs.json"  # object_store's emulator form: no OAuth, no metadata server
    account.write_text(
        json.dumps(
            {
                "gcs_base_url": f"http://127.0.0.1:{port}",
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
    )
    for name in [n for n in os.environ if n.startswith("GOOGLE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT", str(account))
    objects = RemoteObjects(parse_location("gs://b/p", ["GOOGLE_ALLOW_HTTP=true"]), max_retries=0)
    with pytest.raises(LakeUnreachableError):
        objects.put("_opsaudit/lease.json", b"{}", if_match="1700000000000000")
