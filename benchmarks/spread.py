"""Run-to-run spread: N fresh-process runs of the quick suite, max/min of each check's median.

Usage: python benchmarks/spread.py [--runs 5] [--limit 1.15] [-- extra pytest args]

Each run is a new ``python -m pytest suites/ --perf-quick`` process (nothing is compared
against a baseline).  For every check the script prints the spread of its run medians
(max / min) and lists the checks above ``--limit`` with the runs' medians, so the cause can
be looked for (warm-up, thread pools, the first run of a session, machine drift).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Run the suite N times and report each check's spread."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.15)
    parser.add_argument("pytest_args", nargs="*", default=["suites/"])
    args = parser.parse_args()
    medians: dict[str, list[float]] = defaultdict(list)
    units: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports"
        (Path(tmp) / "baselines").mkdir()
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs}", flush=True)
            subprocess.run(
                [
                    sys.executable, "-m", "pytest", *args.pytest_args, "--perf-quick", "-q",
                    "-p", "no:cacheprovider", "--perf-report-dir", str(reports),
                    "--perf-baseline-dir", str(Path(tmp) / "baselines"), "--perf-fail-on", "fail",
                ],
                cwd=ROOT,
                env=os.environ,
                check=False,
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        for path in sorted(reports.glob("*/*.json")):
            for result in json.loads(path.read_text())["results"]:
                medians[result["id"]].append(float(np.median(result["samples"])))
                units[result["id"]] = result["unit"]
    rows = sorted(
        ((max(v) / min(v), k, v) for k, v in medians.items() if len(v) == args.runs),
        reverse=True,
    )
    within = sum(1 for spread, _, _ in rows if spread <= args.limit)
    print(f"\n{within} of {len(rows)} checks within {args.limit} (max/min of {args.runs} runs)")
    for spread, node, values in rows:
        mark = "  " if spread <= args.limit else "> "
        shown = ", ".join(f"{v:.4g}" for v in values)
        print(f"{mark}{spread:6.3f}  {node.split('::')[-1]}  [{shown}] {units[node]}")


if __name__ == "__main__":
    main()
