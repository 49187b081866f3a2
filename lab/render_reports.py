"""Regenerate the HTML pages of the run records kept under lab/ (they are not committed).

    python -m lab.render_reports            # every run record under lab/gpu-runs
    python -m lab.render_reports lab/gpu-runs/h200

Each ``*.json`` that is a run record gets its page beside it through ``perfsuite report``
(the same command a user runs). A/B records (``"schema": "perfsuite-ab"``) are skipped: no
command renders one from its record yet, so their pages stay committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    folders = [Path(a) for a in sys.argv[1:]] or [ROOT / "lab" / "gpu-runs"]
    failed = 0
    for folder in folders:
        for record in sorted(folder.rglob("*.json")):
            if json.loads(record.read_text()).get("schema") == "perfsuite-ab":
                continue
            done = subprocess.run(
                [sys.executable, "-m", "perfsuite", "report", str(record),
                 "--report-dir", str(record.parent)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            print(f"{'ok' if done.returncode == 0 else 'FAILED'}  {record.with_suffix('.html')}")
            failed += done.returncode != 0
            if done.returncode:
                print(done.stderr.strip()[-500:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
