"""Screenshots of the HTML report from real runs: passing, regressed, and a pre-upgrade A/B.

Usage: python scripts/screenshots.py [--out docs/screenshots]

It runs a few checks of the suite in quick mode on this machine, into a temporary directory:
torch's GEMMs and forward convolutions when torch is installed (the checks whose run
medians moved least between fresh processes on the 2-core VMs, within 1.05), else numpy's
memory bandwidth and GEMMs:

1. five baseline runs (the default window), saved (quick runs are forced into the baseline);
2. a run judged against them, with nothing changed: passing, or inconclusive where the
   machine is noisy; with ``--tries N``, run again (up to N runs in all) until one passes,
   printing every attempt's outcomes, so the README can say how many it took;
3. a run with a 40% slowdown injected into every measured duration
   (``perfsuite/slowdown.py``): the report with regressions;
4. a pre-upgrade A/B: the five baseline runs (A, the old stack) against a run of the same
   checks under a "new image" that sets ``OMP_NUM_THREADS=1`` (B), with ``perfsuite compare
   --html``: a real change of the stack's configuration, with its environment diff.

Each page is opened in headless Chromium and saved as PNG (the top of the page, where the
verdict is, 1400 px wide).  Needs Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMPY = ["suites/test_memory_bandwidth.py", "suites/test_gemm.py", "-k", "numpy"]
TORCH = ["suites/test_gemm.py", "suites/test_conv_roofline.py", "-k", "torch and (gemm or forward)"]
CHECKS = TORCH if importlib.util.find_spec("torch") else NUMPY


def _pytest(workdir: Path, *extra: str, env: dict[str, str] | None = None) -> Path:
    reports = workdir / "reports"
    before = set(reports.rglob("*.json")) if reports.exists() else set()
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", *CHECKS, "--hw=auto", "--perf-quick", "-q",
            "-p", "no:cacheprovider", "-p", "perfsuite.slowdown",
            "--perf-report-dir", str(reports), "--perf-baseline-dir", str(workdir / "baselines"),
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode not in (0, 1):  # 1: a check regressed, which some runs are meant to
        raise SystemExit(f"pytest exited {done.returncode}: {' '.join(map(str, done.args))}")
    (record,) = set(reports.glob("*/*.json")) - before
    return record


def _shoot(page: Path, png: Path, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("Chromium is not installed (apt-get install chromium)")
    subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--window-size=1400,{height}", f"--screenshot={png}", page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    print(f"{png}: {png.stat().st_size // 1024} KiB")


def _summary(name: str, record: Path) -> bool:
    """Print a run's outcomes and changes; True when no check regressed, failed or was noisy."""
    results = json.loads(record.read_text())["results"]
    outcomes = Counter(r["outcome"] for r in results)
    changes = ", ".join(f"{r['baseline']['ratio'] - 1:+.0%}" for r in results)
    print(f"{name}: {dict(outcomes)}; changes {changes}", flush=True)
    return not {"regressed", "fail", "noisy"} & set(outcomes)


def main() -> None:
    """Run, render and photograph."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument(
        "--tries",
        type=int,
        default=1,
        help="unchanged runs to try until one passes (every attempt is printed; default 1)",
    )
    args = parser.parse_args()
    if args.tries < 1:
        parser.error("--tries must be 1 or more")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "baselines").mkdir()
        print("checks:", " ".join(CHECKS))
        baseline_runs = [
            _pytest(work, "--perf-save-baseline", "--perf-force-baseline") for _ in range(5)
        ]
        for attempt in range(1, args.tries + 1):
            unchanged = _pytest(work)
            if _summary(f"unchanged, try {attempt} of {args.tries}", unchanged):
                break
        slowed = _pytest(work, env={"PERFSUITE_INJECT_SLOWDOWN": "0.4"})
        _summary("slowed", slowed)
        upgraded = _pytest(work, env={"OMP_NUM_THREADS": "1"})
        _summary("new image (OMP_NUM_THREADS=1)", upgraded)
        ab = work / "ab.html"
        subprocess.run(
            [sys.executable, "-m", "perfsuite", "compare", *map(str, baseline_runs),
             str(upgraded), "--html", str(ab)],
            check=False,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        _shoot(unchanged.with_suffix(".html"), args.out / "report-unchanged.png", 1100)
        _shoot(slowed.with_suffix(".html"), args.out / "report-regressed.png", 1100)
        _shoot(ab, args.out / "report-ab.png", 1100)


if __name__ == "__main__":
    main()
