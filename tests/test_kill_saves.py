"""kill -9 a process while it saves baselines, again and again: nothing it leaves is broken.

Each round starts a process that saves into a baseline of 2,000 checks in a loop and kills
it with SIGKILL at a random moment; every JSON file under the baselines folder (the
baseline and its history copies) must then still parse, and the next save must leave no
temporary file behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5
ENTRIES = 2000

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
print("saving", flush=True)
n = 0
while True:
    n += 1
    store.save("cpu", results, f"run-{n}")
"""


def _broken(root: Path) -> list[str]:
    problems = []
    for path in root.rglob("*.json"):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    return problems


def _save_once(root: Path, env: dict[str, str]) -> None:
    once = SAVER.replace("while True", "while n < 1")
    subprocess.run(
        [sys.executable, "-c", once, str(root), "100"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


@pytest.mark.integration  # real processes, killed with SIGKILL
def test_a_writer_killed_mid_save_leaves_every_baseline_file_valid(tmp_path: Path) -> None:
    rng = random.Random(2026)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    _save_once(tmp_path, env)
    for i in range(ROUNDS):
        with subprocess.Popen(
            [sys.executable, "-c", SAVER, str(tmp_path), str(ENTRIES)],
            env=env, stdout=subprocess.PIPE, text=True,
        ) as proc:  # fmt: skip
            assert proc.stdout is not None
            # Killed once it saves (not while it still imports), within its first few saves:
            # at a random moment of one of them.
            started = proc.stdout.readline()
            assert started == "saving\n", f"round {i + 1}: the writer did not start"
            time.sleep(rng.uniform(0.0, 1.0))
            proc.send_signal(signal.SIGKILL)
        assert not _broken(tmp_path), f"round {i + 1}"
    _save_once(tmp_path, env)  # the next save cleans what the killed writers left
    assert not list(tmp_path.rglob(".*.tmp"))
    assert not _broken(tmp_path)
    assert list(tmp_path.rglob("history/*.json"))  # history copies were kept
