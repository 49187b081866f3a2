"""CI: ``perfsuite bisect`` over 8 releases of a small package, one of which is really slower.

The fixture package ``perfsuite-bisect-fixture`` comes in releases 1.0 to 1.7, built here as
wheels into a local folder.  From 1.5 on its ``work()`` sums twice as many numbers: a real
slowdown of what the check measures, timed on the real clock (the measurement seam only
steadies the machine's noise readings).  The bisection must name 1.5 in at most
ceil(log2 8) + 1 = 4 A/B steps.

    python .ci/bisect_releases.py          # from the repository root, in perfsuite's venv
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from wheels import CHECK, DIST, write_wheel  # noqa: E402

RELEASES = [f"1.{minor}" for minor in range(8)]
FIRST_SLOW = "1.5"
NUMBERS = 50_000  # summed by one call of work(): about 1 ms


def main() -> int:
    """Build the releases, bisect them, and check what the search found."""
    with tempfile.TemporaryDirectory(prefix="perfsuite-bisect-") as tmp:
        work = Path(tmp)
        wheels = work / "wheels"
        wheels.mkdir()
        for version in RELEASES:
            numbers = 2 * NUMBERS if version >= FIRST_SLOW else NUMBERS
            source = f"def work():\n    return sum(range({numbers}))\n"
            write_wheel(wheels, version, source)
        (work / "test_fixture.py").write_text(CHECK)
        env = {**os.environ, "PIP_FIND_LINKS": str(wheels), "PERFSUITE_CACHE": str(work / "cache")}
        # Each side reads a steady machine through perfsuite's measurement seam, as the tests'
        # A/B runs do: on a busy runner the noise guard would rightly leave every round out,
        # and this step is about the search.  The clock, and so the slowdown, stay real.
        env["PYTEST_PLUGINS"] = "perfsuite.testing"
        # A built environment's packages come uncompiled; with bytecode caching off, every
        # side would compile its imports again.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "perfsuite", "bisect", "--package", DIST,
             "--good", RELEASES[0], "--bad", RELEASES[-1], "--tolerance", "0.2",
             "--min-rounds", "3", "--max-rounds", "20", "--output-dir", "out",
             "--", "test_fixture.py"],
            cwd=work, env=env, text=True, capture_output=True, timeout=1800, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        print(done.stdout + done.stderr)
        (path,) = (work / "out").glob("*/bisect.json")
        data = json.loads(path.read_text())
        for step in data["steps"]:
            (verdict,) = step["verdicts"].values()
            print(
                f"step {step['a']} -> {step['b']}: {verdict['verdict']}, B/A "
                f"{verdict['ratio']}, {step['rounds']} rounds, {step['seconds']} s"
            )
        print(f"bisect over {len(RELEASES)} releases: {seconds:.0f} s in all")
        most = math.ceil(math.log2(len(RELEASES))) + 1
        problems = []
        if done.returncode != 1:
            problems.append(f"exit status {done.returncode}, not 1 (a release regressed)")
        if data["first_bad"] != FIRST_SLOW:
            problems.append(f"named {data['first_bad'] or 'nothing'}, not {FIRST_SLOW}")
        if len(data["steps"]) > most:
            problems.append(f"{len(data['steps'])} A/B steps, more than {most}")
        for problem in problems:
            print(f"CI: bisect: {problem}", file=sys.stderr)
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
