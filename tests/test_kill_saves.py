"""kill -9 a process while it saves baselines, again and again: nothing it leaves is broken.

Each round starts a process that saves into a baseline of 2,000 checks in a loop and kills
it with SIGKILL at a random moment; every JSON file under the baselines folder (the
baseline and its history copies) must then still parse, and the next save must leave no
temporary file behind.

The writers are forked from one process that has imported perfsuite and built the results
once (an import takes longer than several saves): each round's writer is a process of its
own, saving from its first moment, and the SIGKILL ends it as it would any other.
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

# Reads one command a line: "save" saves once (100 checks) and says "saved"; "writer" forks
# a process that saves all ENTRIES checks in a loop, says its pid, and says "gone" once it
# has died.
SAVER = """
import os, sys
from pathlib import Path
from perfsuite.store.baseline import BaselineStore
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
for command in sys.stdin:
    if command == "save\\n":
        store.save("cpu", results[:100], "run-1")
        print("saved", flush=True)
        continue
    pid = os.fork()
    if pid == 0:
        n = 0
        while True:
            n += 1
            store.save("cpu", results, f"run-{n}")
    print(pid, flush=True)
    os.waitpid(pid, 0)
    print("gone", flush=True)
"""


def _broken(root: Path) -> list[str]:
    problems = []
    for path in root.rglob("*.json"):
        try:
            json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    return problems


@pytest.mark.smoke
@pytest.mark.integration  # real processes, killed with SIGKILL
def test_a_writer_killed_mid_save_leaves_every_baseline_file_valid(tmp_path: Path) -> None:
    rng = random.Random(2026)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", SAVER, str(tmp_path), str(ENTRIES)],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as saver:  # fmt: skip
        assert saver.stdin is not None and saver.stdout is not None

        def ask(command: str) -> str:
            saver.stdin.write(f"{command}\n")
            saver.stdin.flush()
            return saver.stdout.readline().strip()

        assert ask("save") == "saved"
        for i in range(ROUNDS):
            writer = int(ask("writer"))
            # A save takes about 0.2 s: killed within its first few, at a random moment.
            time.sleep(rng.uniform(0.0, 1.0))
            os.kill(writer, signal.SIGKILL)
            assert saver.stdout.readline() == "gone\n"
            assert not _broken(tmp_path), f"round {i + 1}"
        assert ask("save") == "saved"  # the next save cleans what the killed writers left
        saver.stdin.close()
    assert saver.returncode == 0
    assert not list(tmp_path.rglob(".*.tmp"))
    assert not _broken(tmp_path)
    assert list(tmp_path.rglob("history/*.json"))  # history copies were kept
