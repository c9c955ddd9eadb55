"""`opsaudit simulate` serves, and the printed curl line's key and URL answer."""

from __future__ import annotations

import subprocess
import sys

import httpx


def test_simulate_prints_a_working_key_and_url() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--port", "0", "--seed", "3", "--days", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(8)]
        base = lines[0].split()[-1]
        key = lines[1].split()[-1]
        assert base.startswith("http://127.0.0.1:") and base.endswith("/api/v2")
        assert f'curl -H "Authorization: Bearer {key}" "{base}/projects?org_id=' in lines[5]
        assert lines[6].strip() == f"NEON_API_KEY={key} OPSAUDIT_BASE_URL={base} opsaudit sync"
        org = lines[2].split()[1].rstrip(",")
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}) as client:
            r = client.get(f"{base}/projects", params={"org_id": org})
        assert r.status_code == 200 and r.json()["projects"]
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_busy_port_is_one_line_and_exit_2() -> None:
    import socket

    from click.testing import CliRunner

    from exporter.cli import cli

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["simulate", "--port", str(port)], prog_name="opsaudit")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: cannot serve on 127.0.0.1:{port}: Address already in use; pick another --port "
        "(0 picks a free one)\n"
    )


def test_ranges_are_checked_as_the_demo_checks_them() -> None:
    from click.testing import CliRunner

    from exporter.cli import cli

    for args, message in (
        (["--days", "0"], "Invalid value for '--days': 0.0 is not in the range 0<x<=180."),
        (["--projects", "0"], "Invalid value for '--projects': 0 is not in the range 1<=x<=1000."),
        (["--port", "70000"], "Invalid value for '--port': 70000 is not in the range 0<=x<=65535."),
        (["--time-scale", "nan"], "Invalid value for '--time-scale': 'nan' is not a finite number"),
        (
            ["--time-scale", "0"],
            "Invalid value for '--time-scale': 0.0 is not in the range 0<x<=1000000.",
        ),
        # A finite but astronomical scale: --live's first tick was an OverflowError that
        # killed the clock's thread (a traceback, then a simulator that never advanced).
        (
            ["--time-scale", "1e308", "--live"],
            "Invalid value for '--time-scale': 1e+308 is not in the range 0<x<=1000000.",
        ),
    ):
        result = CliRunner().invoke(cli, ["simulate", *args], prog_name="opsaudit")
        assert result.exit_code == 2, args
        assert message in result.stderr, result.stderr
