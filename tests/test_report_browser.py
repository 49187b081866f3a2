"""The HTML report in a real browser: Debian's headless Chromium.

Rendered from the committed fixture run records; asserts no console output (errors or
otherwise), that the script ran and the charts are drawn, that filtering works, that hostile
text stays text, and saves a screenshot (set PERFSUITE_SCREENSHOT_DIR to keep it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.judge.compare import compare_runs, compared_record
from perfsuite.report.explain import explained_record
from perfsuite.report.html import render
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]
# A real browser: the integration tier.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CI"),
        reason="Chromium is not installed (apt-get install chromium); CI installs it",
    ),
]


def chromium(tmp_path: Path, url: str, *args: str) -> tuple[str, str]:
    assert CHROMIUM is not None, "CI must install Chromium (see .ci/run)"
    profile = tmp_path / "chromium-profile"
    proc = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")  # rendered once; the tests only read it
def report(
    tmp_path_factory: pytest.TempPathFactory, repeated_runs: Callable[..., list[str]]
) -> Path:
    # Three runs before: enough for the baseline's own spread (a confident verdict).
    before = [load_record(Path(p)) for p in repeated_runs(FIXTURES / "report-baseline.json")]
    base = before[-1]
    run = load_record(FIXTURES / "report-run.json")
    rows, _, _ = compare_runs(before, run)
    judged = explained_record(compared_record(run, rows))
    hostile = '<script>document.title="pwned"</script><img src=x onerror="document.title=1">'
    first = replace(judged.results[0], params={**judged.results[0].params, "note": hostile})
    env = {**judged.environment, "variables": {"TF_NOTE": hostile}}
    judged = replace(judged, results=(first, *judged.results[1:]), environment=env)
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render(judged, baseline=base))
    return path


def test_report_renders_without_console_errors(tmp_path: Path, report: Path) -> None:
    dom, stderr = chromium(tmp_path, report.as_uri(), "--dump-dom")
    assert console(stderr) == []
    assert 'data-ready="1"' in dom, "the report's script ran to the end"
    for key in ("roofline", "memory_bandwidth", "gemm", "knobs"):
        assert re.search(rf'id="chart-{key}"[^>]*>.*?<svg', dom, re.S), key
    assert "<title>perfsuite regression report" in dom and "pwned" not in dom.split("</title>")[0]
    assert "<img" not in dom, "injected markup must stay text"
    assert "&lt;script&gt;document.title" in dom


def test_filter_from_the_url_hash(tmp_path: Path, report: Path) -> None:
    dom, stderr = chromium(
        tmp_path, report.as_uri() + "#verdict=regressed&sort=change&dir=asc", "--dump-dom"
    )
    assert console(stderr) == []
    assert 'data-shown="1"' in dom
    assert 'aria-sort="ascending"' in dom


def test_screenshot(tmp_path: Path, report: Path) -> None:
    shot = tmp_path / "report.png"
    _, stderr = chromium(
        tmp_path, report.as_uri(), f"--screenshot={shot}", "--window-size=1300,2400"
    )
    assert console(stderr) == []
    assert shot.stat().st_size > 20_000
    keep = os.environ.get("PERFSUITE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")


def test_why_opens_the_detail_row_on_click(tmp_path: Path, report: Path) -> None:
    """A click on a row's "why" shows its detail row, spanning the table; a second hides it."""
    page = report.read_text()
    # A test harness beside the page's own script: the CSP (script hashes) is taken out.
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    probe = """<script>
window.addEventListener("load", function () {
  var button = document.querySelector("tr.main button.why");
  var detail = button.closest("tr").nextElementSibling;
  var seen = [detail.hidden];
  button.click(); seen.push(detail.hidden, button.getAttribute("aria-expanded"));
  seen.push(detail.getBoundingClientRect().width >= 0.9 * document.getElementById("verdicts").getBoundingClientRect().width);
  button.click(); seen.push(detail.hidden);
  document.body.dataset.clicks = JSON.stringify(seen);
});
</script></body>"""
    harness = tmp_path / "harness.html"
    harness.write_text(page.replace("</body>", probe))
    dom, stderr = chromium(tmp_path, harness.as_uri(), "--dump-dom")
    assert console(stderr) == []
    clicks = re.search(r'data-clicks="([^"]*)"', dom)
    assert clicks is not None, dom[-500:]
    assert clicks.group(1).replace("&quot;", '"') == '[true,false,"true",true,true]'
