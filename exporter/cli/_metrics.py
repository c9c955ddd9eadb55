"""`--metrics-file`: the Prometheus textfile `sync` and `check` write (exporter/ops/metrics.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter.core.errors import ConfigError, NoDatasetError

F = TypeVar("F", bound=Callable[..., Any])


def _metrics_folder_writable(_ctx: click.Context, _param: Any, value: Path | None) -> Any:
    """Refused before any work (exit 2), not after the run did its work: the file is written
    aside in its directory and renamed."""
    if value is None:
        return None
    folder = value.parent
    if not folder.is_dir():
        raise click.BadParameter(f"{folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{folder} is not writable")
    return value


def metrics_file_option(f: F) -> F:
    """`--metrics-file PATH`: Prometheus textfile-collector output, replaced atomically."""
    return click.option(
        "--metrics-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        callback=_metrics_folder_writable,
        help="Also write Prometheus metrics to FILE (node_exporter textfile collector: "
        "name it *.prom in its directory); replaced atomically.",
    )(f)


def write_metrics_file(
    path: Path,
    data_dir: Path | str,
    storage_options: Sequence[str] = (),
    extra: Sequence[Any] = (),
    as_of: Any = None,
) -> None:
    """Collect the trail's metrics from `data_dir` (plus `extra` families) and write `path`."""
    from exporter.ops.metrics import collect_metrics, write_metrics

    if isinstance(data_dir, str):  # object storage: from the restored state
        from exporter.store.readers import reading

        try:
            with reading(data_dir, storage_options) as local:
                metrics = collect_metrics(local, as_of=as_of)
        except NoDatasetError:  # nothing synced there: as a local directory without state
            metrics = []
    else:
        metrics = collect_metrics(data_dir, as_of=as_of)
    try:
        write_metrics(path, [*metrics, *extra])
    except OSError as exc:
        raise ConfigError(f"cannot write --metrics-file {path}: {exc.strerror}") from None


def write_unjudged_check(path: Path, as_of: dt.datetime | None) -> None:
    """`check --metrics-file` when check could not judge: `opsaudit_check_ok 0` as of now."""
    from exporter.ops.metrics import unjudged_check_metrics, write_metrics

    # Not writable: the error check met is the one to report (the caller raises it again).
    with contextlib.suppress(OSError):
        write_metrics(path, unjudged_check_metrics(as_of or dt.datetime.now(dt.timezone.utc)))


__all__ = ["metrics_file_option", "write_metrics_file", "write_unjudged_check"]
