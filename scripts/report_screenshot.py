"""Regenerate docs/report.png, the README's picture of `opsaudit report --format html`.

Runs the demo (the simulator, a sync, the report) into a temporary directory, then takes a
screenshot of the page's top in headless Chromium with the network cut off (the page needs
none). Needs `chromium` (Debian package) on PATH.

    python scripts/report_screenshot.py [--out docs/report.png] [--height 1900]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1900)
    args = parser.parse_args(argv)
    browser = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )
    if browser is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    from exporter import build_report, connect, render_html, run_demo

    with tempfile.TemporaryDirectory(prefix="opsaudit-shot-") as tmp:
        result = run_demo(Path(tmp) / "data")
        if result.summary.exit_code != 0:
            print(f"the demo sync failed: {result.summary.line()}", file=sys.stderr)
            return 1
        con = connect(result.data_dir)
        try:
            page = Path(tmp) / "report.html"
            page.write_text(render_html(con, build_report(con)), encoding="utf-8")
        finally:
            con.close()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                f"--user-data-dir={Path(tmp) / 'profile'}",
                "--proxy-server=http://127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--hide-scrollbars",
                f"--window-size={args.width},{args.height}",
                "--virtual-time-budget=15000",
                f"--screenshot={args.out.resolve()}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
