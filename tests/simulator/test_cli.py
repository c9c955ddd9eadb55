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
