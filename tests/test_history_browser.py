"""The history site in a real browser: Debian's headless Chromium (the integration tier).

A 60-night history with a numpy upgrade that slowed one check, and one bad night: the page
renders with no console output, draws a chart per check, and is saved as a screenshot (set
PERFSUITE_SCREENSHOT_DIR to keep it; docs/screenshots/history.png is one).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_history import PROFILE, write_nights
from test_report_browser import CHROMIUM, chromium, console

from perfsuite.cli import main
from perfsuite.judge.outcome import EXIT_REGRESSED

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CI"),
        reason="Chromium is not installed (apt-get install chromium); CI installs it",
    ),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    levels = [40.0] * 34 + [33.0] * 26
    levels[17] = 24.0  # one bad night: an outlier, not two changes
    versions = ["2.4.6"] * 34 + ["2.5.0"] * 26
    reports = write_nights(root / "reports", levels, numpy_versions=versions, cv=0.015)
    out = root / "site"
    assert main(["history", "--report-dir", str(reports), "--html", str(out)]) == EXIT_REGRESSED
    return out / f"{PROFILE}.html"


@pytest.mark.smoke
def test_history_page_renders_without_console_output(tmp_path: Path, site: Path) -> None:
    dom, stderr = chromium(tmp_path, site.as_uri(), "--dump-dom")
    assert console(stderr) == []
    assert dom.count("<svg") == 2 and "run 35: -17" in dom
    assert "perfsuite bisect --package numpy --good 2.4.6 --bad 2.5.0" in dom
    assert "outliers set aside: run(s) 18" in dom


def test_history_screenshot(tmp_path: Path, site: Path) -> None:
    shot = tmp_path / "history.png"
    _, stderr = chromium(tmp_path, site.as_uri(), f"--screenshot={shot}", "--window-size=1250,1000")
    assert console(stderr) == []
    assert shot.stat().st_size > 20_000
    keep = os.environ.get("PERFSUITE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "history.png")
