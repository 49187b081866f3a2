"""Regenerate the HTML pages of the records kept under lab/ (the pages are not committed).

    python -m lab.render_reports            # every record under lab/gpu-runs
    python -m lab.render_reports lab/gpu-runs/h200

Each ``*.json`` under the folders, a run record or an A/B's record (``ab.json``), gets its
page beside it through ``perfsuite report``, the command a user runs.  So does the H200
session's first run, whose record is kept as a test fixture (``tests/fixtures/h200-run.json``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Records kept elsewhere, and where their pages go.
ELSEWHERE = {
    ROOT / "tests" / "fixtures" / "h200-run.json": (
        ROOT / "lab" / "gpu-runs" / "h200" / "run-20261126T035012115Z.html"
    ),
}


def render(record: Path, page: Path) -> bool:
    """Write one record's page with ``perfsuite report``; say how it went."""
    done = subprocess.run(
        [sys.executable, "-m", "perfsuite", "report", str(record),
         "--report-dir", str(record.parent), "-o", str(page)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    print(f"{'ok' if done.returncode == 0 else 'FAILED'}  {page}")
    if done.returncode:
        print(done.stderr.strip()[-500:], file=sys.stderr)
    return done.returncode == 0


def main() -> int:
    folders = [Path(a) for a in sys.argv[1:]] or [ROOT / "lab" / "gpu-runs"]
    jobs = [(r, r.with_suffix(".html")) for f in folders for r in sorted(f.rglob("*.json"))]
    if not sys.argv[1:]:
        jobs += list(ELSEWHERE.items())
    failed = sum(not render(record, page) for record, page in jobs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
