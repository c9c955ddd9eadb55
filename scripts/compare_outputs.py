"""Record what the read commands print on a fixed dataset, and compare two recordings byte for byte.

The proof of issue 20 ("How to prove nothing changed"): a change that only moves code must not
change one byte of what `opsaudit query`, `report`, `status` and `check` print. Three steps:

    python scripts/compare_outputs.py generate DATASET [--tree T] [--size proof|tiny] [--no-lake]
    python scripts/compare_outputs.py record OUT_A --dataset DATASET --tree BEFORE
    python scripts/compare_outputs.py record OUT_B --dataset DATASET --tree AFTER
    python scripts/compare_outputs.py compare OUT_A OUT_B     # exit 1 and the first differences

`generate` runs once: the simulator (fixed seed, its history ending at a fixed minute of the
generation) synced into a local directory and into a Delta dataset on a loopback moto S3 server,
whose objects are then saved as files. Each `record` copies that dataset afresh (the local
directory; the objects uploaded to a new moto server under the same bucket and prefix), so the
only thing that differs between two recordings is the code under `--tree`.

Each command runs with `PYTHONPATH=<tree>` in a child forked from one runner process (the same
`exporter.cli.main` the `opsaudit` script calls, at a fraction of the start-up cost), its stdout,
stderr, exit code and any `-o`/`--metrics-file` file recorded. The wall clock is pinned in the
runner to the `now` saved by `generate`: `datetime.now()` as `exporter`'s modules see it,
`time.time()`, `time.gmtime()` and friends all answer that instant, so ages, lags, `stuck` and
log timestamps are the same in every recording. Nothing in `exporter` is changed for this: the
product has no clock hook, and the tree under test may be an old commit.

Only public names of `exporter` are used (`sync`, `SyncConfig`, `RetryPolicy`,
`exporter.simulator`, `exporter.cli.main`), so any commit since the package move's start works.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MOTO_SERVER = REPO / "tests" / "lake" / "moto_server.py"
BUCKET, PREFIX = "proof", "trail"
LAKE_URL = f"s3://{BUCKET}/{PREFIX}"
ENDPOINT = "{endpoint}"  # stands for the moto server's address in the recorded command lines

# Dataset sizes: `proof` for the before/after comparison (a few seconds to generate), `tiny`
# for the test that records the same tree twice.
SIZES: dict[str, dict[str, Any]] = {
    "proof": {"projects": 5, "shared_projects": 1, "days": 10, "ops_per_project_per_day": 60},
    "tiny": {"projects": 2, "shared_projects": 1, "days": 2, "ops_per_project_per_day": 12},
}
SEED = 20

QUERIES = {
    "operations": "SELECT * FROM operations ORDER BY id LIMIT 25",
    "by-status": "SELECT action, status, count(*) AS n, sum(failures_count) AS failures "
    "FROM operations GROUP BY ALL ORDER BY ALL",
    "failures-by-day": "SELECT * FROM failures_by_day ORDER BY ALL LIMIT 30",
    "sync-runs": "SELECT * FROM sync_runs ORDER BY ALL",
    "names": "SELECT * FROM branches ORDER BY ALL LIMIT 10",
    "stuck-param": "SELECT * FROM stuck_operations_older_than('1 hour', as_of := $as_of) "
    "ORDER BY ALL LIMIT 20",
    "views": "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "ORDER BY ALL",
}
QUERY_FORMATS = ("table", "json", "jsonl", "csv", "markdown")
REPORT_FORMATS = ("table", "json", "csv", "markdown", "html")
REPORT_SECTIONS = (
    "failing",
    "stuck",
    "errors",
    "projects",
    "branches",
    "failures",
    "durations",
    "action_mix",
)


def commands(data: list[str], pin: str, quick: bool) -> list[tuple[str, list[str]]]:
    """(name, argv) of every recorded command; `data`: the --data-dir (and storage) options.
    `OUT` in an argv names a file the runner records too (`-o`, `--metrics-file`). `quick`: one
    query in every format, and a few report, status and check forms (the test's recording)."""
    out: list[tuple[str, list[str]]] = []
    queries = {"by-status": QUERIES["by-status"]} if quick else QUERIES
    for name, sql in queries.items():
        params = ["-p", f"as_of={pin}"] if "$as_of" in sql else []
        for fmt in QUERY_FORMATS:
            out.append((f"query-{name}-{fmt}", ["query", *data, *params, "--format", fmt, sql]))
    out.append(("query-refused", ["query", *data, "DELETE FROM operations"]))
    for fmt in ("table", "json", "html") if quick else REPORT_FORMATS:
        tail = ["-o", "OUT"] if fmt == "html" else []
        out.append((f"report-{fmt}", ["report", *data, "--format", fmt, *tail]))
    for fmt in ("table", "json"):
        out.append((f"status-{fmt}", ["status", *data, "--format", fmt]))
    findings = ["--max-age", "10m", "--reread-max-age", "5m", "--fail-on", "stuck > 0"]
    findings += ["--fail-on", "failure_rate > 1% over 24h", "--metrics-file", "OUT"]
    out.append(("check-text", ["check", *data]))
    out.append(("check-findings-text", ["check", *data, *findings]))
    if quick:
        return out
    out.append(("query-to-file", ["query", *data, "--format", "csv", "-o", "OUT", "SELECT 42"]))
    out.append(("query-two-statements", ["query", *data, "SELECT 1; SELECT 2"]))
    for fmt in REPORT_FORMATS:
        tail = ["-o", "OUT"] if fmt == "html" else []
        out.append((f"report-7d-{fmt}", ["report", *data, "--since", "7d", "--format", fmt, *tail]))
    out.append(("report-all", ["report", *data, "--all"]))
    out.append(("report-top-until", ["report", *data, "--top", "3", "--until", "3d"]))
    for section in REPORT_SECTIONS:
        argv = ["report", *data, "--format", "csv", "--section", section]
        out.append((f"report-csv-{section}", argv))
    for fmt in ("table", "json"):
        out.append((f"status-runs-1-{fmt}", ["status", *data, "--format", fmt, "--runs", "1"]))
    out.append(("check-json", ["check", *data, "--format", "json"]))
    out.append(("check-findings-json", ["check", *data, "--format", "json", *findings]))
    out.append(("check-as-of-text", ["check", *data, "--as-of", pin]))
    out.append(("check-as-of-json", ["check", *data, "--format", "json", "--as-of", pin]))
    out.append(("check-unknown-action", ["check", *data, "--fail-on", "stuck(no_such) > 0"]))
    return out


# -- generate -------------------------------------------------------------------------------------


def generate(dataset: Path, tree: Path, size: str, lake: bool) -> None:
    if dataset.exists() and any(dataset.iterdir()):
        sys.exit(f"{dataset} is not empty: generate writes a new dataset")
    dataset.mkdir(parents=True, exist_ok=True)
    with _moto(lake) as endpoint:
        env = _env(tree, endpoint)
        spec = {"dataset": str(dataset), "size": size, "lake": lake, "endpoint": endpoint}
        _python(tree, ["_generate", json.dumps(spec)], env)
        if endpoint is not None:
            _download(endpoint, dataset / "lake")
    print(f"generated {dataset}: {(dataset / 'manifest.json').read_text().strip()}")


def _generate_child(spec: dict[str, Any]) -> None:
    """In a child with PYTHONPATH=tree: the simulator synced into the local and the lake dataset."""
    import datetime as dt

    from exporter import RetryPolicy, SyncConfig, sync
    from exporter.simulator import SimConfig, Simulator

    dataset = Path(spec["dataset"])
    # The history ends at the whole minute before now, so `--since 7d` and ages read as on a live
    # account; `now` (the pinned clock of every recording) is half an hour after the sync.
    end = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0)
    config = SimConfig(seed=SEED, start=end.strftime("%Y-%m-%dT%H:%M:%SZ"), **SIZES[spec["size"]])
    targets: list[tuple[str | Path, list[str]]] = [(dataset / "local", [])]
    if spec["lake"]:
        opts = [f"AWS_ENDPOINT_URL={spec['endpoint']}", "AWS_ALLOW_HTTP=true"]
        targets.append((LAKE_URL, opts))
    with Simulator(config) as sim:
        for data_dir, opts in targets:
            summary = sync(
                SyncConfig(
                    data_dir=data_dir,
                    storage_options=opts,
                    api_key=sim.personal_key,
                    base_url=sim.base_url,
                    max_rps=None,
                    retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
                )
            )
            if int(summary.exit_code) != 0:
                sys.exit(f"the sync into {data_dir} failed: {summary.line()} {summary.error}")
    now = dt.datetime.now(dt.timezone.utc).replace(second=0, microsecond=0)
    now += dt.timedelta(minutes=31)
    manifest = {"now": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "size": spec["size"], "seed": SEED}
    manifest["history_end"] = config.start
    manifest["lake"] = spec["lake"]
    (dataset / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


# -- record ---------------------------------------------------------------------------------------


def record(out: Path, dataset: Path, tree: Path, quick: bool) -> None:
    manifest = json.loads((dataset / "manifest.json").read_text())
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} is not empty: record writes a new recording")
    out.mkdir(parents=True, exist_ok=True)
    pin = manifest["now"]
    kinds = ["local"] + (["lake"] if manifest["lake"] else [])
    with tempfile.TemporaryDirectory(prefix="opsaudit-proof-") as tmp:
        work = Path(tmp)
        for kind in kinds:
            # The CLI runs in `work` with a relative --data-dir, so no output names a temp path.
            shutil.rmtree(work, ignore_errors=True)
            (work / "home").mkdir(parents=True)
            with _moto(kind == "lake") as endpoint:
                if endpoint is None:
                    shutil.copytree(dataset / "local", work / "data")
                    data = ["--data-dir", "data"]
                else:
                    _upload(endpoint, dataset / "lake")
                    data = [
                        "--data-dir",
                        LAKE_URL,
                        "--storage-option",
                        f"AWS_ENDPOINT_URL={endpoint}",
                    ]
                    data += ["--storage-option", "AWS_ALLOW_HTTP=true"]
                cmds = commands(data, pin, quick)
                spec = {"pin": pin, "work": str(work), "out": str(out / kind), "commands": cmds}
                (out / kind).mkdir()
                _python(tree, ["_run", json.dumps(spec)], _env(tree, endpoint, home=work / "home"))
                shown = [
                    (n, [ENDPOINT if a == f"AWS_ENDPOINT_URL={endpoint}" else a for a in argv])
                    for n, argv in cmds
                ]
                (out / kind / "commands.json").write_text(json.dumps(shown, indent=1) + "\n")
    rev = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    # Not compared: which tree made the recording.
    (out / "recorded-from.txt").write_text(f"{tree}\n{rev}\n")
    print(
        f"recorded {sum(1 for _ in out.rglob('*.exit'))} commands from {tree} ({rev[:10]}) in {out}"
    )


def _pin_clock(pin: str) -> None:
    """Make every wall-clock read of `exporter` answer `pin`: `time.time()` and friends for the
    whole process; `datetime.now()` through the `datetime` class and module that `exporter`'s
    modules hold (swapping `datetime.datetime` for everyone would also hand the pinned class to
    the C extensions imported later, which check types by identity). Call it once every
    `exporter` module is imported."""
    import datetime as dtm
    import types

    real = dtm.datetime
    stamp = real.fromisoformat(pin.replace("Z", "+00:00")).timestamp()

    class _Meta(type):
        # Instances are real datetimes (see __new__); isinstance and issubclass must say so.
        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, real)

    class PinnedDatetime(dtm.datetime, metaclass=_Meta):
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            # The C constructors of a subclass call cls(...): give back real instances, which
            # orjson, pyarrow and DuckDB take as they take any datetime.
            return real(*args, **kwargs)

        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real.fromtimestamp(stamp, tz)

        @classmethod
        def utcnow(cls) -> Any:
            return real.fromtimestamp(stamp, dtm.timezone.utc).replace(tzinfo=None)

        @classmethod
        def today(cls) -> Any:
            return real.fromtimestamp(stamp)

    pinned_module = types.ModuleType("datetime")
    pinned_module.__dict__.update(vars(dtm))
    pinned_module.datetime = PinnedDatetime  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name == "exporter" or name.startswith("exporter."):
            for attr, value in list(vars(module).items()):
                if value is real:
                    setattr(module, attr, PinnedDatetime)
                elif value is dtm:
                    setattr(module, attr, pinned_module)
    real_gmtime, real_localtime, real_strftime = time.gmtime, time.localtime, time.strftime
    time.time = lambda: stamp
    time.time_ns = lambda: int(stamp) * 1_000_000_000
    time.gmtime = lambda secs=None: real_gmtime(stamp if secs is None else secs)
    time.localtime = lambda secs=None: real_localtime(stamp if secs is None else secs)
    time.strftime = lambda fmt, t=None: real_strftime(
        fmt, real_localtime(stamp) if t is None else t
    )


def _import_exporter() -> Any:
    """Every module of `exporter` (so each can be pinned), and the CLI's `main`."""
    import importlib
    import pkgutil

    import exporter
    from exporter.cli import main

    for info in pkgutil.walk_packages(exporter.__path__, "exporter."):
        if info.name != "exporter.__main__":  # that one runs the CLI
            importlib.import_module(info.name)
    return main


def _run_child(spec: dict[str, Any]) -> None:
    """In the runner (PYTHONPATH=tree, clock pinned): each command in a forked child, its output
    in files named after it."""
    main = _import_exporter()
    _pin_clock(spec["pin"])
    os.chdir(spec["work"])

    out = Path(spec["out"])
    for name, argv in spec["commands"]:
        argv = list(argv)
        file = out / f"{name}.file"
        if "OUT" in argv:
            argv[argv.index("OUT")] = str(file)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _exec_in_child(main, argv, out / f"{name}.stdout", out / f"{name}.stderr")
        _, status = os.waitpid(pid, 0)
        (out / f"{name}.exit").write_text(f"{os.waitstatus_to_exitcode(status)}\n")


def _exec_in_child(main: Any, argv: list[str], stdout: Path, stderr: Path) -> None:
    """What `opsaudit ARGV` does, with fd 1 and 2 going to files; never returns."""
    code = 1
    try:
        for fd, path in ((1, stdout), (2, stderr)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.argv = ["opsaudit", *argv]  # what the console script sees
        try:
            main()
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        import atexit
        import logging

        atexit._run_exitfuncs()
        logging.shutdown()
    except BaseException:  # print it as the interpreter would, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# -- compare --------------------------------------------------------------------------------------


def compare(a: Path, b: Path, show: int) -> int:
    """Print the first differences between two recordings; 1 if any, else 0 (2: a recording
    is missing or unfinished: `record` writes recorded-from.txt last)."""
    for out in (a, b):
        if not (out / "recorded-from.txt").is_file():
            print(f"{out} is not a finished recording (no recorded-from.txt)", file=sys.stderr)
            return 2
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    skip = {Path("recorded-from.txt")}
    differing = []
    for rel in sorted((files_a | files_b) - skip):
        if rel not in files_a or rel not in files_b:
            differing.append((rel, f"only in {a if rel in files_a else b}"))
            continue
        da, db = (a / rel).read_bytes(), (b / rel).read_bytes()
        if da != db:
            differing.append((rel, _first_difference(da, db)))
    compared = len((files_a & files_b) - skip)
    for rel, why in differing[:show]:
        print(f"DIFFERS {rel}: {why}")
    if len(differing) > show:
        print(f"... and {len(differing) - show} more")
    if differing:
        print(f"{len(differing)} of {len((files_a | files_b) - skip)} files differ")
        return 1
    print(f"identical: {compared} files byte for byte")
    return 0


def _first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}:\n  - {x[:300]!r}\n  + {y[:300]!r}"
    return f"{len(la)} lines against {len(lb)} (the same up to the shorter)"


# -- plumbing -------------------------------------------------------------------------------------


def _env(tree: Path, endpoint: str | None, home: Path | None = None) -> dict[str, str]:
    """A clean environment: no OPSAUDIT_*/NEON_*/AWS_* of the caller, fixed locale, width, TZ."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPSAUDIT_", "NEON_", "AWS_", "PYTHON", "COLUMNS", "LINES"))
    }
    env.update(PYTHONPATH=str(tree.resolve()), PYTHONHASHSEED="0", TZ="UTC", LANG="C.UTF-8")
    env.update(LC_ALL="C.UTF-8", COLUMNS="120", LINES="40", NO_COLOR="1", TERM="dumb")
    if home is not None:
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    if endpoint is not None:
        env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing-secret-value")
        env.update(AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    return env


def _python(tree: Path, args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args], env=env, check=False
    )
    if proc.returncode != 0:
        sys.exit(f"{args[0]} failed (exit {proc.returncode}) with PYTHONPATH={tree}")


@contextlib.contextmanager
def _moto(start: bool = True) -> Iterator[str | None]:
    """A moto S3 server on loopback (tests/lake/moto_server.py) with the bucket created, its
    address yielded; None and no server when not `start`."""
    if not start:
        yield None
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [sys.executable, str(MOTO_SERVER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            sys.exit(f"the moto server did not start: {line!r}")
        endpoint = f"http://127.0.0.1:{int(line)}"
        _s3(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _s3(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing-secret-value",
    )


def _download(endpoint: str, into: Path) -> None:
    """Every object of the bucket as a file (the key is the relative path)."""
    s3 = _s3(endpoint)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            path = into / obj["Key"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read())


def _upload(endpoint: str, objects: Path) -> None:
    s3 = _s3(endpoint)
    for path in sorted(p for p in objects.rglob("*") if p.is_file()):
        s3.put_object(
            Bucket=BUCKET, Key=path.relative_to(objects).as_posix(), Body=path.read_bytes()
        )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("_generate", "_run"):
        spec = json.loads(sys.argv[2])
        _generate_child(spec) if sys.argv[1] == "_generate" else _run_child(spec)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="make the dataset both recordings copy")
    g.add_argument("dataset", type=Path)
    g.add_argument("--tree", type=Path, default=REPO, help="checkout whose code syncs the data")
    g.add_argument("--size", choices=sorted(SIZES), default="proof")
    g.add_argument("--no-lake", action="store_true", help="only the local dataset")
    r = sub.add_parser("record", help="run the read commands of --tree on a copy of the dataset")
    r.add_argument("out", type=Path)
    r.add_argument("--dataset", type=Path, required=True)
    r.add_argument("--tree", type=Path, default=REPO, help="checkout whose code runs")
    r.add_argument("--quick", action="store_true", help="a few commands of each kind")
    c = sub.add_parser("compare", help="compare two recordings byte for byte")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--show", type=int, default=10, help="differences printed")
    args = parser.parse_args()
    started = time.monotonic()
    if args.command == "generate":
        generate(args.dataset, args.tree, args.size, not args.no_lake)
    elif args.command == "record":
        record(args.out, args.dataset, args.tree, args.quick)
    else:
        sys.exit(compare(args.a, args.b, args.show))
    print(f"({time.monotonic() - started:.1f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
