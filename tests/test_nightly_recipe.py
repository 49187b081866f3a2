"""The nightly CI recipe end to end, on 60 nights in a results store.

One step, on the night numpy was upgraded: ``scripts/nightly`` (what the documented GitHub
and GitLab jobs run) must find that step, attribute it to numpy with the bisect command,
and report nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_history import NUMPY, write_nights

from perfsuite.cli import main
from perfsuite.judge.outcome import EXIT_OK, EXIT_REGRESSED

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_the_nightly_recipe_finds_the_step_and_names_the_package(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    versions = ["2.4.6"] * 40 + ["2.5.0"] * 20  # numpy upgraded on night 41, and 15% slower
    write_nights(reports, [40.0] * 40 + [34.0] * 20, numpy_versions=versions)
    assert main(["store", "import", str(reports), "--store", str(reports / "_store")]) == EXIT_OK
    env = {
        **os.environ,
        "PERFSUITE_REPORTS": str(reports),
        "PERFSUITE_SKIP_SUITE": "1",  # tonight's suite run is the store's own test
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "nightly")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == EXIT_REGRESSED, done.stderr
    doc = json.loads((reports / "history.json").read_text())
    found = [(c["id"], change) for c in doc["checks"] for change in c["changes"]]
    ((check, change),) = found  # the one step, and nothing else
    assert check.endswith(NUMPY) and change["run"] == 41 and change["direction"] == "regressed"
    assert change["attribution"]["changes"] == [
        {"key": "software.numpy.version", "old": "2.4.6", "new": "2.5.0"}
    ]
    (command,) = change["attribution"]["bisect"]
    assert command.startswith("perfsuite bisect --package numpy --good 2.4.6 --bad 2.5.0")
    assert all(not c.get("outliers") for c in doc["checks"])
    assert f"regressed: {NUMPY} at run 41" in done.stdout  # the job's log
    assert (reports / "history-site" / "index.html").is_file()
