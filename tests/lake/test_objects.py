"""The conditional writes the lease and the state objects rest on, as the S3 server (moto) and
local disk implement them."""

from __future__ import annotations

from typing import Any

import pytest

from exporter import ConfigError
from exporter.store.lake import PreconditionFailed, parse_location


def test_conditional_put_semantics(root: Any) -> None:
    objects = root.open().objects
    etag = objects.put("_opsaudit/x.json", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailed):  # If-None-Match: * on an existing object
        objects.put("_opsaudit/x.json", b"two", if_none_match=True)
    new = objects.put("_opsaudit/x.json", b"three", if_match=etag)
    assert new != etag
    with pytest.raises(PreconditionFailed):  # If-Match with a stale etag
        objects.put("_opsaudit/x.json", b"four", if_match=etag)
    with pytest.raises(PreconditionFailed):  # If-Match on a missing object
        objects.put("_opsaudit/missing.json", b"five", if_match=etag)
    data, meta = objects.get("_opsaudit/x.json")
    assert (data, meta.etag.strip('"')) == (b"three", new.strip('"'))
    assert objects.get("_opsaudit/nothing") is None
    assert [m.key for m in objects.list("_opsaudit/")] == [
        "_opsaudit/dataset.json",
        "_opsaudit/x.json",
    ]
    objects.delete("_opsaudit/x.json")
    objects.delete("_opsaudit/x.json")  # idempotent
    assert objects.get("_opsaudit/x.json") is None


def test_conditional_commits_cannot_be_turned_off(bucket: Any) -> None:
    from exporter.store.lake import LakeDataset

    loc = parse_location(bucket.url(), {**bucket.options, "conditional_put": "disabled"})
    ds = LakeDataset.open(loc, create=True)
    with pytest.raises(ConfigError, match="conditional"):
        _ = ds.options


def _commit_one(loc: Any, tmp_path: Any, make_versions: Any) -> None:
    """A batch committed under the lease (delta-rs and our object client both at work), read
    back by a fresh open."""
    from exporter.store.lake import LakeDataset

    ds = LakeDataset.open(loc, create=True)
    lease = ds.lease()
    lease.acquire()
    state = tmp_path / "s.sqlite"
    state.write_bytes(b"state")
    ds.commit(make_versions(0, 3), state, 1, lease=lease)
    lease.release()
    assert LakeDataset.open(loc).committed_version() == 1


def test_credentials_from_an_aws_profile(
    bucket: Any, tmp_path: Any, monkeypatch: Any, make_versions: Any
) -> None:
    """Keys in a profile (AWS_PROFILE + shared credentials file), none in the environment: the
    table commits (delta-rs) and the lease/state objects (obstore via boto3) both find them."""

    creds = tmp_path / "credentials"
    creds.write_text(
        "[audit]\naws_access_key_id = testing\naws_secret_access_key = testing-secret-value\n"
    )
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config-none"))
    monkeypatch.setenv("AWS_PROFILE", "audit")
    _commit_one(parse_location(bucket.url(), bucket.options), tmp_path, make_versions)


def test_client_settings_from_the_environment(
    bucket: Any, tmp_path: Any, monkeypatch: Any, make_versions: Any
) -> None:
    """AWS_ALLOW_HTTP (and the other client settings) in the environment, as README says the
    AWS_* settings come: delta-rs read it, our own client did not (the options it is given
    replace those obstore reads there), and every run was exit 6, "HTTP error: builder
    error"."""
    from exporter.store.lake import LakeDataset

    monkeypatch.setenv("AWS_ENDPOINT_URL", bucket.server.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    loc = parse_location(bucket.url(), {})
    _commit_one(loc, tmp_path, make_versions)
    # An option given wins over the environment: refused plain HTTP is the client's error.
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    with pytest.raises(ConfigError, match="AWS_ALLOW_HTTP=true"):
        LakeDataset.open(loc).committed_version()
    refused = parse_location(bucket.url(), {"AWS_ALLOW_HTTP": "false"})
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    with pytest.raises(ConfigError, match="AWS_ALLOW_HTTP=true"):
        LakeDataset.open(refused).committed_version()


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("gs://bucket/p", {}),
        ("az://container/p", {"azure_storage_account_name": "acct"}),
        (
            "s3://bucket/p",
            {
                "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
                "AWS_ALLOW_HTTP": "true",
                "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
                "timeout": "30s",
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true",  # delta-rs only: not given to obstore
            },
        ),
    ],
)
def test_object_store_clients_from_deltalake_option_names(
    url: str, options: dict[str, str]
) -> None:
    """The same --storage-option names configure deltalake and the control-object client
    (built without any request: nothing listens at those endpoints)."""
    from exporter.store.lake import RemoteObjects

    RemoteObjects(parse_location(url, options))


def test_unknown_option_is_a_config_error() -> None:
    from exporter.store.lake import RemoteObjects

    with pytest.raises(ConfigError, match="AWS_BOGUS_KEY: not an accepted option"):
        RemoteObjects(parse_location("s3://bucket/p", {"AWS_BOGUS_KEY": "1"}))


def test_an_error_on_a_local_lake_is_classified_not_a_key_error(tmp_path: Any) -> None:
    """A failure of a `file://` lake raised KeyError: 'file' while its message was scrubbed of
    the storage settings (a directory has no settings family): now the storage error it is."""
    from exporter.core.errors import StorageError
    from exporter.store.lake.objects import classify

    location = parse_location(f"file://{tmp_path}")
    error = classify(OSError("disk on fire"), location, "cannot read table projects in")
    assert isinstance(error, StorageError)
    assert str(error).startswith("cannot read table projects in ") and "disk on fire" in str(error)
