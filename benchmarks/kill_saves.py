"""Kill -9 a process while it saves baselines, many times, and check that nothing broke.

Each round starts a process that saves into a baseline of ``--entries`` checks in a loop,
kills it with SIGKILL at a random moment, then checks that every JSON file under the
baselines directory (the baseline and its history copies) is valid, and that the next save
leaves no temporary file behind.  CI runs it with a small ``--rounds``.

Usage: python benchmarks/kill_saves.py [--rounds 50] [--entries 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SAVER = """
import sys
from pathlib import Path
from perfsuite.baseline import BaselineStore
from perfsuite.model import BaselineVerdict, FloorVerdict, Result, Summary, Work

def result(i, v):
    return Result(
        id=f"suites/test_x.py::test_x[{i}]", check="x", params={}, metric="m", unit="GB/s",
        higher_is_better=True, samples=(v, v * 1.01, v * 0.99), seconds=(1.0, 1.0, 1.0),
        summary=Summary(v, v, v, v, 3, None), work=Work(1.0, "B"),
        floor=FloorVerdict("no-reference"), baseline=BaselineVerdict("new"),
    )

store = BaselineStore(Path(sys.argv[1]))
entries = int(sys.argv[2])
results = [result(i, 1.0 + i) for i in range(entries)]
n = 0
while True:
    n += 1
    store.save("cpu", results, f"run-{n}")
"""


def check(root: Path) -> list[str]:
    """Problems found: unreadable JSON files."""
    problems = []
    for path in root.rglob("*.json"):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--entries", type=int, default=5000)
    args = parser.parse_args()
    rng = random.Random(2026)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(
            [sys.executable, "-c", SAVER.replace("while True", "while n < 1"), tmp, "100"],
            env=env,
            check=True,
        )
        left_tmp = 0
        for i in range(args.rounds):
            proc = subprocess.Popen([sys.executable, "-c", SAVER, tmp, str(args.entries)], env=env)
            time.sleep(rng.uniform(0.5, 2.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            left_tmp += len(list(root.rglob(".*.tmp")))
            problems = check(root)
            if problems:
                print(f"round {i + 1}: broken files:\n  " + "\n  ".join(problems))
                return 1
        # The next save cleans what the killed writers left.
        subprocess.run(
            [sys.executable, "-c", SAVER.replace("while True", "while n < 1"), tmp, "100"],
            env=env,
            check=True,
        )
        leftovers = list(root.rglob(".*.tmp"))
        history = len(list(root.rglob("history/*.json")))
        print(
            f"{args.rounds} kills: every JSON valid; {left_tmp} temporary file(s) seen right "
            f"after kills, {len(leftovers)} left after the next save; {history} history copies "
            "kept (bounded)"
        )
        return 1 if leftovers or check(root) else 0


if __name__ == "__main__":
    sys.exit(main())
