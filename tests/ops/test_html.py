"""`opsaudit report --format html`: one self-contained page, rendered in real headless Chromium
with the network cut off; every chart must draw its traces and no script may fail."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from exporter.analytics.html import CHARTS

from .conftest import analytics_dataset, invoke

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (.ci/run installs the Debian package `chromium`)",
)
WIDTH, HEIGHT = 1280, 3400  # the whole page: headline, on-call tables, the five charts

# Added to a copy of the page, first thing in <head>: records script errors and the chart boxes
# as attributes of <html>, which --dump-dom prints.
PROBE = """<script>
(function () {
  var root = document.documentElement;
  function note(text) { root.setAttribute('data-js-errors',
      (root.getAttribute('data-js-errors') || '') + text + '\\n'); }
  window.addEventListener('error', function (e) { note('error: ' + e.message); });
  window.addEventListener('unhandledrejection', function (e) { note('rejection: ' + e.reason); });
  var consoleError = console.error;
  console.error = function () { note('console.error: ' + Array.from(arguments).join(' '));
                                consoleError.apply(console, arguments); };
  window.addEventListener('load', function () {
    var boxes = {};
    document.querySelectorAll('[id^="chart-"]').forEach(function (div) {
      var r = div.getBoundingClientRect();
      boxes[div.id] = [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];
    });
    root.setAttribute('data-boxes', JSON.stringify(boxes));
    // Per chart: legend entries, annotations, the y axis type, and every text drawn outside
    // the chart's box (a clipped label).
    var charts = {};
    document.querySelectorAll('[id^="chart-"]').forEach(function (div) {
      var box = div.getBoundingClientRect();
      var texts = function (sel) {
        return Array.from(div.querySelectorAll(sel)).map(function (t) { return t.textContent; });
      };
      var clipped = [];
      div.querySelectorAll('svg text').forEach(function (t) {
        var r = t.getBoundingClientRect();
        if (!t.textContent || r.width === 0) return;
        if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 ||
            r.bottom > box.bottom + 0.5) clipped.push(t.textContent);
      });
      charts[div.id] = {legend: texts('.legendtext'), annotations: texts('.annotation-text'),
                        ytype: div._fullLayout.yaxis.type, clipped: clipped,
                        xticks: texts('.xtick text')};
    });
    root.setAttribute('data-charts', JSON.stringify(charts));
  });
})();
</script>"""


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on `page`, every request to the network refused."""
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={profile}",
            # The page must need nothing from the network: make sure it cannot have it.
            "--proxy-server=http://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={WIDTH},{HEIGHT}",
            "--hide-scrollbars",
            "--virtual-time-budget=15000",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the hand-computed dataset (tests/analytics/conftest.py) as of its end."""
    tmp = tmp_path_factory.mktemp("html")
    data_dir = analytics_dataset(tmp / "data")
    out = tmp / "report.html"
    result = invoke(
        "report",
        "--data-dir",
        str(data_dir),
        "--until",
        "2025-01-12T14:00:00Z",
        "--format",
        "html",
        "-o",
        str(out),
    )
    assert (result.exit_code, result.stdout) == (0, ""), result.output
    return out


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    # No script, style or image is fetched from anywhere: plotly.js is inline.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)
    for chart in CHARTS:
        assert text.count(f'id="chart-{chart}"') == 1, chart
    assert "<title>opsaudit report: 12 operations</title>" in text


def test_headline_on_the_page(page: Path) -> None:
    # Hand-computed from the dataset's table: failed o3 o5 o8 (fc 2+1+1), failing now o5 o8,
    # open after an hour o5 o7 o8 o12, of which o7 and o12 are not failing (stuck) and o5 o8
    # failing; p90 of start_compute's 100 200 300 400 ms is 370 over 4 operations.
    text = page.read_text()
    start = text.index('<table class="headline">')
    rows = re.findall(
        r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", text[start : text.index("</table>", start)]
    )
    assert rows[0][0] == "Data"
    assert rows[0][1].startswith("last successful sync 2025-01-11T10:02:00Z, ")
    assert rows[0][1].endswith(" before this report; last run 2025-01-12T13:01:00Z: partial")
    assert rows[1:4] == [
        ("Operations", "12, created 2025-01-10T10:00:00Z .. 2025-01-12T12:00:00Z"),
        ("Failed at least once", "3 (25.0 %); 4 retries"),
        ("Failing now (failed or error)", "2"),
    ]
    assert rows[4][0] == "Stuck (not terminal 1h after creation)"
    assert re.fullmatch(
        r"2 still running or waiting as of \S+Z \(and 2 failing, counted above\)", rows[4][1]
    )
    assert rows[5:] == [
        ("Most failures", "start_compute (2), suspend_compute (1)"),
        # The dataset's branches were never listed: their ids (names: tests/sync/test_names_report.py).
        (
            "Most failures by branch",
            "start_compute failed 2 times on br-p1; suspend_compute failed once on br-p2",
        ),
        ("Slowest by p90", "start_compute (370 ms, n=4)"),
    ]


# Rendered plotly traces and points per chart, counted by hand from the dataset's table:
# failure-rate: start_compute 3 days, suspend_compute 3, create_branch 2, lfc_autoresize 1;
# durations: p50/p90/p99 of the 3 actions with terminal operations; action-mix: 4 actions x 3
# days; stuck-retried: stuck and retried for start_compute, suspend_compute, lfc_autoresize
# (o5 o7 o8 o12 open after an hour; o3 o5 o8 retried); compute-start: p50/p90/p99 x 3 days.
EXPECTED = {
    # ... and the overall line over the 3 days.
    "failure-rate": (["scatter"] * 5, 12),
    "durations": (["bars"] * 3, 9),
    "action-mix": (["bars"] * 4, 12),
    "stuck-retried": (["bars"] * 2, 6),
    "compute-start": (["scatter"] * 3, 9),
}


@needs_chromium
def test_the_stuck_bars_count_what_the_headline_counts(page: Path) -> None:
    """Stuck as the headline and the Stuck table say it: o7 (start_compute) and o12
    (lfc_autoresize), not o5 and o8, which are failing (the bars counted them too: 4 of 2)."""
    text = page.read_text()
    plot = re.search(r'Plotly\.newPlot\(\s*"chart-stuck-retried",\s*', text)
    assert plot is not None
    traces, _ = json.JSONDecoder().raw_decode(text, plot.end())
    bars = {t["name"]: dict(zip(t["x"], t["y"])) for t in traces}
    assert bars == {
        "stuck": {"start_compute": 1, "lfc_autoresize": 1, "suspend_compute": 0},
        "retried": {"start_compute": 2, "lfc_autoresize": 0, "suspend_compute": 1},
    }


def test_every_chart_draws_in_chromium(page: Path, tmp_path: Path) -> None:
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    dumped = chromium(probed, tmp_path / "profile-dom", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None
    assert "data-js-errors" not in root.group(0), root.group(0)
    assert "Uncaught" not in dumped.stderr, dumped.stderr[-2000:]
    starts = [dom.index(f'id="chart-{chart}"') for chart in CHARTS]
    for chart, start, end in zip(CHARTS, starts, [*starts[1:], len(dom)]):
        section = dom[start:end]
        traces = re.findall(r'class="trace (scatter|bars)', section)
        assert (traces, section.count('class="point"')) == EXPECTED[chart], chart

    # The screenshot: every chart's box holds a drawing (many non-white pixels, several colours).
    from PIL import Image

    boxes = json.loads(
        re.search(r"data-boxes=\"([^\"]*)\"", root.group(0)).group(1).replace("&quot;", '"')  # type: ignore[union-attr]
    )
    shot = tmp_path / "report.png"
    taken = chromium(probed, tmp_path / "profile-shot", f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    for chart in CHARTS:
        left, top, width, height = boxes[f"chart-{chart}"]
        assert top + height <= HEIGHT, f"{chart} is below the screenshot"
        box = image.crop((int(left), int(top), int(left + width), int(top + height)))
        raw = box.tobytes()
        pixels = [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]
        drawn = sum(1 for p in pixels if p != (255, 255, 255))
        colours = {p for p in pixels if max(p) - min(p) > 40}  # saturated: the traces
        assert drawn > 0.02 * len(pixels), (chart, drawn)
        assert len(colours) >= 2, chart


@needs_chromium
def test_charts_read_right_in_chromium(page: Path, tmp_path: Path) -> None:
    """Issue 23: an overall failure-rate line with the low-volume actions greyed, latency on a
    log axis, the partial first and last days marked, no label clipped."""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("<head>", "<head>" + PROBE, 1))
    dumped = chromium(probed, tmp_path / "profile", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    root = re.search(r"<html[^>]*>", dumped.stdout)
    assert root is not None
    found = re.search(r'data-charts="([^"]*)"', root.group(0))
    assert found is not None, root.group(0)[:2000]
    charts = json.loads(found.group(1).replace("&quot;", '"'))
    # Every action of the fixed dataset has fewer than 20 operations a day.
    assert charts["chart-failure-rate"]["legend"] == [
        "all actions",
        "start_compute (low volume)",
        "suspend_compute (low volume)",
        "create_branch (low volume)",
        "lfc_autoresize (low volume)",
    ]
    assert (charts["chart-durations"]["ytype"], charts["chart-compute-start"]["ytype"]) == (
        "log",
        "log",
    )
    # The history starts 2025-01-10 10:00 and --until ends it 2025-01-12 14:00: both partial.
    for chart in ("failure-rate", "action-mix", "compute-start"):
        assert charts[f"chart-{chart}"]["annotations"] == ["partial day", "partial day"], chart
        assert charts[f"chart-{chart}"]["xticks"] == ["2025-01-10", "2025-01-11", "2025-01-12"]
    for chart in CHARTS:
        assert charts[f"chart-{chart}"]["clipped"] == [], chart
    text = page.read_text()
    assert "<p>Until 2025-01-12T14:00:00Z. Generated " in text


def test_partial_days() -> None:
    from exporter.analytics.html import partial_days
    from exporter.analytics.report import Report

    utc = dt.timezone.utc
    days = [dt.date(2025, 1, 10), dt.date(2025, 1, 11), dt.date(2025, 1, 12)]
    now = dt.datetime(2025, 1, 12, 14, tzinfo=utc)
    whole = Report(
        since=dt.datetime(2025, 1, 10, tzinfo=utc),
        until=dt.datetime(2025, 1, 13, tzinfo=utc),
        project_ids=None,
        operations=1,
    )
    assert partial_days(days, whole, dt.datetime(2025, 1, 14, tzinfo=utc)) == []
    assert partial_days(days, whole, now) == [dt.date(2025, 1, 12)]  # today is not over
    history = Report(
        since=None,
        until=None,
        project_ids=None,
        operations=1,
        first_created_at=dt.datetime(2025, 1, 10, 10, tzinfo=utc),
    )
    assert partial_days(days, history, now) == [dt.date(2025, 1, 10), dt.date(2025, 1, 12)]
    assert partial_days(days[:1], history, now) == [dt.date(2025, 1, 10)]


def test_empty_dataset_page(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    out = tmp_path / "r.html"
    result = invoke("report", "--data-dir", str(data_dir), "--format", "html", "-o", str(out))
    assert result.exit_code == 0
    text = out.read_text()
    assert "No operations in the dataset yet: run `opsaudit sync` first." in text
    assert 'id="chart-' not in text


def test_demo_writes_the_page_and_prints_its_path(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    result = invoke("demo", "--data-dir", str(data_dir), "--projects", "2", "--days", "2")
    assert result.exit_code == 0, result.output
    page = data_dir / "report.html"
    line = f"The report with charts (one page, opens offline in a browser): {page}"
    assert line in result.stdout.splitlines()
    text = page.read_text()
    for chart in CHARTS:
        assert f'id="chart-{chart}"' in text, chart
