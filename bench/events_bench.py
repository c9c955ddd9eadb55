"""Events benchmarks (issue 22): delivery throughput to a loopback receiver, and what
`--events-backfill` costs a backfill.

    python bench/events_bench.py delivery --ops 100000   # events/s and CPU per event
    python bench/events_bench.py backfill --ops 100000      # sync wall with vs without events
    python bench/events_bench.py render --baseline-code OLD  # only the JSON build, µs per event

`delivery` fills the outbox with a backfill whose sinks cannot take anything (an events file in
a directory that does not exist, a webhook on a closed port, one attempt), then delivers a copy
of that outbox in a child process to each sink alone: the events file, and a webhook receiver
in its own process (a minimal asyncio HTTP/1.1 server answering 204, keep-alive), once per lane
count. The child measures wall time and its own CPU (user + sys) around `deliver()` only.
`backfill` times `opsaudit sync` of the same world without events and with
`--events-backfill --events-file`, alternating, and reports the medians; with
`--baseline-code DIR` (a checkout of older code, e.g. `git archive` of a commit) it also runs
that code's two syncs in each round, so a before/after pair comes from one invocation. The
simulator runs in its own process (sync_bench.SimProcess). Results are appended to
bench/results/sync.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_bench import RESULTS, SimProcess, record, run_sync

SECRET = "whsec_YmVuY2gtc2lnbmluZy1rZXktb2YtMzItYnl0ZXMhISE="


def _receiver(conn: Any) -> None:
    """A minimal HTTP/1.1 receiver: reads each request's body, answers 204, keeps alive."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        conn.send(server.sockets[0].getsockname()[1])
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)
        server.close()

    asyncio.run(main())


_DELIVER = """
import json, resource, sys, time
from pathlib import Path
from exporter.events.delivery import deliver
from exporter.events.webhook import read_webhook_secret
from exporter.events.outbox import EventsConfig
from exporter.store.opener import open_store
data, sink, url, secret, lanes = sys.argv[1:6]
if sink == "file":
    config = EventsConfig(file=Path(data) / "events.jsonl")
else:
    config = EventsConfig(webhook_url=url, webhook_key=read_webhook_secret(Path(secret)),
                          webhook_lanes=int(lanes))
store = open_store(data, [], lock=True, wait=False)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
done = deliver(store.state, config, store.versions_reader())
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"delivered": sum(done.delivered.values()), "pending": done.pending,
                  "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}))
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_delivery(args: argparse.Namespace) -> None:
    projects = args.projects
    per_day = max(1, args.ops // (projects * args.days))
    sim = SimProcess(
        {"seed": 4, "projects": projects, "days": args.days, "ops_per_project_per_day": per_day}
    )
    parent, child = mp.Pipe()
    receiver = mp.get_context("spawn").Process(target=_receiver, args=(child,))
    receiver.start()
    port = parent.recv()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            secret = root / "secret"
            secret.write_text(SECRET)
            filled = root / "filled"
            os.environ["OPSAUDIT_WEBHOOK_SECRET_FILE"] = str(secret)
            fill = run_sync(
                sim,
                filled,
                "--max-rps",
                "0",
                "--events-backfill",
                "--events-file",
                str(root / "missing-dir" / "events.jsonl"),
                "--webhook",
                f"http://127.0.0.1:{_closed_port()}/",
                "--webhook-attempts",
                "1",
            )
            events = fill["summary"]["events_pending"]
            runs = [("file", 1)] + [("webhook", lanes) for lanes in args.lanes]
            for sink, lanes in runs:
                work = root / f"{sink}-{lanes}"
                shutil.copytree(filled, work)
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        _DELIVER,
                        str(work),
                        sink,
                        f"http://127.0.0.1:{port}/hooks",
                        str(secret),
                        str(lanes),
                    ],
                    capture_output=True,
                    check=True,
                    text=True,
                )
                res = json.loads(out.stdout)
                record(
                    "events-delivery",
                    {
                        "sink": sink,
                        "lanes": lanes if sink == "webhook" else None,
                        "events": events,
                        "events_per_s": round(res["delivered"] / res["wall_s"]),
                        "cpu_us_per_event": round(res["cpu_s"] / max(1, res["delivered"]) * 1e6, 1),
                        **res,
                    },
                )
                shutil.rmtree(work)
    finally:
        parent.send("stop")
        receiver.join(10)
        sim.close()


def bench_backfill(args: argparse.Namespace) -> None:
    projects = args.projects
    per_day = max(1, args.ops // (projects * args.days))
    sim = SimProcess(
        {"seed": 5, "projects": projects, "days": args.days, "ops_per_project_per_day": per_day}
    )
    codes = (
        {"": None} if args.baseline_code is None else {"": None, "baseline_": args.baseline_code}
    )
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    versions = 0
    here = os.environ.get("PYTHONPATH")
    try:
        for _ in range(args.runs):
            for prefix, code in codes.items():
                if code is not None:
                    os.environ["PYTHONPATH"] = str(Path(code).resolve())
                elif here is not None:
                    os.environ["PYTHONPATH"] = here
                else:
                    os.environ.pop("PYTHONPATH", None)
                for kind in ("none", "events"):
                    with tempfile.TemporaryDirectory() as tmp:
                        extra = ["--max-rps", "0", "--no-compact"]
                        if kind == "events":
                            extra += ["--events-backfill", "--events-file", f"{tmp}/events.jsonl"]
                        root = Path(code).resolve() if code is not None else Path.cwd()
                        res = run_sync(sim, Path(tmp) / "data", *extra, cwd=root)
                        walls.setdefault(prefix + kind, []).append(res["wall_s"])
                        cpus.setdefault(prefix + kind, []).append(res["cpu_s"])
                        rss.setdefault(prefix + kind, []).append(res["max_rss_mb"])
                        versions = res["summary"]["versions_written"]
        out: dict[str, Any] = {"ops": versions}
        for prefix in codes:
            none = statistics.median(walls[prefix + "none"])
            with_events = statistics.median(walls[prefix + "events"])
            cpu_none = statistics.median(cpus[prefix + "none"])
            cpu_events = statistics.median(cpus[prefix + "events"])
            out |= {
                f"{prefix}wall_s_without": none,
                f"{prefix}wall_s_with_events": with_events,
                f"{prefix}ratio": round(with_events / none, 3),
                f"{prefix}cpu_s_without": cpu_none,
                f"{prefix}cpu_s_with_events": cpu_events,
                f"{prefix}cpu_ratio": round(cpu_events / cpu_none, 3),
                f"{prefix}extra_cpu_us_per_event": round(
                    (cpu_events - cpu_none) / max(1, versions) * 1e6, 2
                ),
                f"{prefix}max_rss_mb_without": max(rss[prefix + "none"]),
                f"{prefix}max_rss_mb_with_events": max(rss[prefix + "events"]),
            }
        record("events-backfill", {**out, "walls": walls, "cpus": cpus, "rss": rss})
    finally:
        if here is not None:
            os.environ["PYTHONPATH"] = here
        sim.close()


_RENDER = """
import glob, json, statistics, sys, time
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from exporter.events.render import COLUMNS, event_lines_buffer
data, runs, piece = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = sorted(glob.glob(data + "/operation_versions/*/*.parquet"))
table = pa.concat_tables([pq.read_table(f, columns=COLUMNS) for f in files])
n = table.num_rows
def names(kind, column):  # each row's project, branch or endpoint name, as the sync knows it
    known = pq.read_table(f"{data}/{kind}/{kind}.parquet", columns=["id", "name"])
    return known["name"].take(pc.index_in(table[column], value_set=known["id"])).to_pylist()
projects = names("projects", "project_id")
branches, endpoints = names("branches", "branch_id"), names("endpoints", "endpoint_id")
def build():
    size = 0
    for s in range(0, n, piece):
        rows = table.slice(s, piece).combine_chunks()
        project = pa.array(projects[s : s + piece], pa.string())
        out = event_lines_buffer(rows, project, branches[s : s + piece], endpoints[s : s + piece])
        size += out.size
    return size
build()
cpu, wall = [], []
for _ in range(runs):
    c, w = time.thread_time(), time.perf_counter()
    size = build()
    cpu.append(time.thread_time() - c)
    wall.append(time.perf_counter() - w)
print(json.dumps({"events": n, "bytes": size, "cpu_s": statistics.median(cpu),
                  "wall_s": statistics.median(wall)}))
"""


def bench_render(args: argparse.Namespace) -> None:
    """Only the events' JSON build (`event_lines_buffer`) over a backfill's rows, `--piece`
    events a call, in a child process per checkout (each from its own root), alternating."""
    sim = SimProcess(
        {
            "seed": 5,
            "projects": args.projects,
            "days": args.days,
            "ops_per_project_per_day": max(1, args.ops // (args.projects * args.days)),
        }
    )
    codes = {"": Path.cwd()}
    if args.baseline_code is not None:
        codes["baseline_"] = Path(args.baseline_code).resolve()
    cpus: dict[str, list[float]] = {}
    out: dict[str, Any] = {"piece": args.piece}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            run_sync(sim, data, "--max-rps", "0", "--no-compact")
            for _ in range(args.rounds):
                for prefix, root in codes.items():
                    res = json.loads(
                        subprocess.run(
                            [
                                sys.executable,
                                "-c",
                                _RENDER,
                                str(data),
                                str(args.runs),
                                str(args.piece),
                            ],
                            capture_output=True,
                            check=True,
                            text=True,
                            cwd=root,
                            env={
                                **os.environ,
                                "PYTHONPATH": str(root),
                                "ARROW_DEFAULT_MEMORY_POOL": "system",
                            },
                        ).stdout
                    )
                    cpus.setdefault(prefix, []).append(res["cpu_s"])
                    out |= {"events": res["events"], f"{prefix}bytes": res["bytes"]}
        for prefix, values in cpus.items():
            out[f"{prefix}cpu_us_per_event"] = round(
                statistics.median(values) / out["events"] * 1e6, 3
            )
        record("events-render", {**out, "cpus": cpus})
    finally:
        sim.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("delivery")
    p.add_argument("--ops", type=int, default=100_000, help="operations in the world (events)")
    p.add_argument("--projects", type=int, default=10)
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--lanes", type=int, nargs="+", default=[1, 4, 8])
    p = sub.add_parser("backfill")
    p.add_argument("--ops", type=int, default=100_000)
    p.add_argument("--projects", type=int, default=10)
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--baseline-code", help="a checkout of older code to run alongside")
    p = sub.add_parser("render")
    p.add_argument("--ops", type=int, default=60_000)
    p.add_argument("--projects", type=int, default=10)
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--piece", type=int, default=10_000, help="events per build call")
    p.add_argument("--runs", type=int, default=7, help="builds per child (median)")
    p.add_argument("--rounds", type=int, default=5, help="children per checkout, alternating")
    p.add_argument("--baseline-code", help="a checkout of older code to run alongside")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    {"delivery": bench_delivery, "backfill": bench_backfill, "render": bench_render}[args.what](
        args
    )


if __name__ == "__main__":
    main()
