"""The views database after a run: written in a child process (the sync never loads DuckDB),
and only when what it names changed (issue 13)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from exporter.analytics.views_db import _write_views_in_child, refresh_views_database
from exporter.engine.publish import publish
from exporter.store.local.dataset import Dataset

from .test_storage import _commit, _ids_through_views_db, _op


def test_the_child_process_writes_the_views_database(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1), _op(2)], "a")
        assert _write_views_in_child(tmp_path) is True
    finally:
        ds.close()
    assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]


def test_the_child_process_reports_a_views_database_held_open(tmp_path: Path) -> None:
    ds = Dataset(tmp_path)
    try:
        assert _write_views_in_child(tmp_path) is True
        holder = duckdb.connect(str(tmp_path / "opsaudit.duckdb"))  # a DuckDB shell, read-write
        try:
            assert _write_views_in_child(tmp_path) is False
        finally:
            holder.close()
    finally:
        ds.close()


def test_unchanged_views_are_not_rewritten_and_changed_ones_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        publish(ds)
        views = tmp_path / "opsaudit.duckdb"
        inode = views.stat().st_ino
        publish(ds)  # nothing changed: the file stays as it is
        assert views.stat().st_ino == inode
        _commit(ds, [_op(2)], "b")  # a new committed file: the views must name it
        publish(ds)
        assert views.stat().st_ino != inode
        assert _ids_through_views_db(tmp_path) == [_op(1)["id"], _op(2)["id"]]
        inode = views.stat().st_ino
        views.unlink()  # deleted by hand: written again
        refresh_views_database(ds)
        assert views.is_file()
    finally:
        ds.close()


def test_a_failed_refresh_is_retried_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = Dataset(tmp_path)
    try:
        _commit(ds, [_op(1)], "a")
        with monkeypatch.context() as m:
            m.setattr("exporter.analytics.views_db._write_views_in_child", lambda root: None)
            m.delitem(__import__("sys").modules, "duckdb")
            publish(ds)
        assert not (tmp_path / "opsaudit.duckdb").exists()
        publish(ds)
        assert _ids_through_views_db(tmp_path) == [_op(1)["id"]]
    finally:
        ds.close()
