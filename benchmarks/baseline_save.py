"""Time and peak memory of one save into a large baseline (100k entries by default).

Usage: python benchmarks/baseline_save.py [--entries 100000]
It builds the baseline first (not timed), then times a save of one new run of 10 checks in
a fresh process and reports wall time and peak RSS (ru_maxrss) of that process.
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
entries = {
    f"suites/test_x.py::test_x[{i}]": {
        "metric": "m", "unit": "GB/s", "higher_is_better": True,
        "runs": [{"run_id": f"r{k}", "created": "2026-11-23T00:00:00+00:00",
                  "samples": [1.0 + i, 1.01 + i, 0.99 + i, 1.0 + i, 1.0 + i],
                  "policy": {"samples": 5, "sample_seconds": 0.1, "timer": "perf_counter",
                             "source": "clock"}} for k in range(5)],
    }
    for i in range(n)
}
data = {"schema_version": 2, "hardware_profile": "cpu", "window": 5, "environments": {},
        "run_policies": {f"r{k}": {"mode": "full", "warmup": 2, "repetitions": 10}
                         for k in range(5)},
        "entries": entries}
import pathlib
p = pathlib.Path(sys.argv[1]) / "cpu" / "baseline.json"
p.parent.mkdir(parents=True, exist_ok=True)
p.write_text(json.dumps(data))
"""

SAVE = """
import json, resource, sys, time
from pathlib import Path
from perfsuite.baseline import BaselineStore
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, Summary, Work
results = [
    Result(id=f"suites/test_x.py::test_x[{i}]", check="x", params={}, metric="m", unit="GB/s",
           higher_is_better=True, samples=(1.0, 1.0, 1.0), seconds=(1.0, 1.0, 1.0),
           summary=Summary(1.0, 1.0, 1.0, 1.0, 3, None), work=Work(1.0, "B"),
           floor=FloorVerdict("no-reference"), baseline=BaselineVerdict("new"))
    for i in range(10)
]
start = time.perf_counter()
BaselineStore(Path(sys.argv[1])).save("cpu", results, "new-run")
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    args = parser.parse_args()
    env_path = {"PYTHONPATH": str(ROOT)}
    import os

    env = {**os.environ, **env_path}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-c", BUILD, tmp, str(args.entries)], check=True)
        size = (Path(tmp) / "cpu" / "baseline.json").stat().st_size / 1e6
        out = subprocess.run(
            [sys.executable, "-c", SAVE, tmp], env=env, check=True, capture_output=True, text=True
        )
        facts = json.loads(out.stdout)
        print(
            f"save into {args.entries} entries ({size:.0f} MB file): {facts['seconds']:.2f} s, "
            f"peak RSS {facts['peak_rss_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
