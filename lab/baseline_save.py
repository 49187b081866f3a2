"""Time and peak memory of one save into a large baseline (100k entries by default).

Usage: python lab/baseline_save.py [--entries 100000] [--runs-per-entry 5]
It builds the baseline first as plain JSON (not timed), then times two saves of one new run
of 10 checks, each in a fresh process, and reports wall time and peak RSS (ru_maxrss):

* the first save reads the plain-JSON file in full and rewrites it in perfsuite's layout;
* the second is the steady state: a save into a baseline that perfsuite wrote.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUILD = """
import json, sys
n = int(sys.argv[2])
k_runs = int(sys.argv[3])
entries = {
    f"suites/test_x.py::test_x[{i}]": {
        "metric": "m", "unit": "GB/s", "higher_is_better": True,
        "runs": [{"run_id": f"r{k}", "created": "2026-11-23T00:00:00+00:00",
                  "samples": [1.0 + i, 1.01 + i, 0.99 + i, 1.0 + i, 1.0 + i],
                  "policy": {"samples": 5, "sample_seconds": 0.1, "timer": "perf_counter",
                             "source": "clock"}} for k in range(k_runs)],
    }
    for i in range(n)
}
data = {"schema_version": 2, "hardware_profile": "cpu", "window": 5, "environments": {},
        "run_policies": {f"r{k}": {"mode": "full", "warmup": 2, "repetitions": 10}
                         for k in range(k_runs)},
        "entries": entries}
import pathlib
p = pathlib.Path(sys.argv[1]) / "cpu" / "baseline.json"
p.parent.mkdir(parents=True, exist_ok=True)
p.write_text(json.dumps(data))
"""

SAVE = """
import json, resource, sys, time
from pathlib import Path
from perfsuite.store.baseline import BaselineStore
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, Summary, Work
run_id = sys.argv[2]
results = [
    Result(id=f"suites/test_x.py::test_x[{i}]", check="x", params={}, metric="m", unit="GB/s",
           higher_is_better=True, samples=(1.0, 1.0, 1.0), seconds=(1.0, 1.0, 1.0),
           summary=Summary(1.0, 1.0, 1.0, 1.0, 3, None), work=Work(1.0, "B"),
           floor=FloorVerdict("no-reference"), baseline=BaselineVerdict("new"))
    for i in range(10)
]
start = time.perf_counter()
BaselineStore(Path(sys.argv[1])).save("cpu", results, run_id)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs-per-entry", type=int, default=5)
    args = parser.parse_args()
    env_path = {"PYTHONPATH": str(ROOT)}
    import os

    env = {**os.environ, **env_path}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-c", BUILD, tmp, str(args.entries), str(args.runs_per_entry)],
            check=True,
        )
        path = Path(tmp) / "cpu" / "baseline.json"
        for label, run_id in (("first save (plain JSON in)", "new-1"), ("steady state", "new-2")):
            size = path.stat().st_size / 1e6
            out = subprocess.run(
                [sys.executable, "-c", SAVE, tmp, run_id],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            facts = json.loads(out.stdout)
            print(
                f"{label}: save into {args.entries} entries of {args.runs_per_entry} run(s) "
                f"({size:.0f} MB file): {facts['seconds']:.2f} s, "
                f"peak RSS {facts['peak_rss_mb']:.0f} MB"
            )
        json.loads(path.read_text())  # still one valid JSON document


if __name__ == "__main__":
    main()
