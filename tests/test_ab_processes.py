"""perfsuite ab and bisect with real processes.

Rounds of fresh processes, an interrupt, a hung side, and a bisection over locally built
wheels of a small package with 5 releases.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from wheels import CHECK as FIXTURE_CHECK
from wheels import DIST, MODULE, write_wheel

from perfsuite.judge import outcome

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import os, time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def work():
    if os.environ.get("HANG_HERE"):
        time.sleep(600)
    return sum(range(20000))

def test_loop(perf):
    perf.measure(Workload(check="loop", params={}, metric="rate", unit="loop/s",
                          work=Work(1.0, "loop"), run=work))
"""


# Each side reads a steady machine through perfsuite's measurement seam: these tests are about
# processes, rounds and the search, and a busy runner (whose rounds the noise guard would
# rightly leave out) must not change what they assert.  The clock stays real.
STEADY = "perfsuite.testing"


def _ctrl_c_as_at_a_terminal() -> None:
    """Let SIGINT raise KeyboardInterrupt in the child, as it does in a terminal's foreground.

    A test runner started in the background of a non-interactive shell (``cmd &``) ignores
    SIGINT, children inherit that, and Python then leaves it ignored: the interrupt under
    test would never arrive.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _perfsuite(*args: str, cwd: Path, env: dict[str, str | None] | None = None, **kw: object):
    """``python -m perfsuite ARGS``; a variable that ``env`` sets to None is unset."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_PLUGINS": STEADY, **(env or {})}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        environ.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        cwd=cwd, env={k: v for k, v in environ.items() if v is not None},
        capture_output=True, text=True, check=False, **kw,
    )  # fmt: skip


def _record(out: Path, name: str) -> dict:
    (path,) = out.glob(f"*/{name}")
    return json.loads(path.read_text())


def test_rounds_alternate_in_fresh_processes_and_keep_every_sample(tmp_path: Path) -> None:
    (tmp_path / "test_loop.py").write_text(CHECK)
    done = _perfsuite(
        "ab", "--a", sys.executable, "--b", sys.executable,
        "--b-env", "PERFSUITE_INJECT_SLOWDOWN=0.5",
        "--b-env", f"PYTEST_PLUGINS={STEADY},perfsuite.slowdown",
        "--min-rounds", "4", "--max-rounds", "4", "--seed", "7", "--output-dir", "out",
        "--", "test_loop.py",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode in (outcome.EXIT_REGRESSED, outcome.EXIT_INCONCLUSIVE), (
        done.stdout + done.stderr
    )
    data = _record(tmp_path / "out", "ab.json")
    assert data["order"][0] == data["order"][1][::-1] and data["order"][2] == data["order"][3][::-1]
    assert len(data["rounds"]) == 8 and not any(r["failed"] for r in data["rounds"])
    pids = {Path(r["record"]).parent for r in data["rounds"]}
    assert len(pids) == 8  # a fresh process and record per side and round
    (check,) = data["checks"]
    assert check["verdict"] in ("regressed", "unknown")
    # A busy runner's rounds may be left out (measured under foreign load), never judged.
    assert len(check["log_ratios"]) + len(check["tainted_rounds"]) == 4
    if check["log_ratios"]:
        assert check["ratio"] < 0.75  # B was made 50% slower
    else:
        assert check["verdict"] == "unknown"
    samples = data["rounds"][0]["readings"]["test_loop.py::test_loop"]["samples"]
    assert len(samples) == 3
    assert ["side variable PERFSUITE_INJECT_SLOWDOWN", None, "0.5"] in data["environment_diff"]
    assert check["tainted_rounds"] == []  # the steady seam: no foreign load is seen
    assert (tmp_path / "out" / data["run_id"] / "ab.html").is_file()
    assert "perfsuite ab: " in done.stdout.splitlines()[-1]


def test_an_ab_run_outside_the_tests_project_keeps_its_folders_where_it_runs(
    tmp_path: Path,
) -> None:
    """A side's pytest reads relative folders against its own root, the tests' project."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_loop.py").write_text(CHECK)
    done = _perfsuite(
        "ab", "--a", sys.executable, "--b", sys.executable, "--min-rounds", "2",
        "--max-rounds", "2", "--", str(project / "test_loop.py"),
        cwd=elsewhere, timeout=600,
    )  # fmt: skip
    assert "refused its arguments" not in done.stdout + done.stderr
    data = _record(elsewhere / "reports" / "ab", "ab.json")
    assert len(data["rounds"]) == 4 and not any(r["failed"] for r in data["rounds"])
    assert not (project / "reports").exists()


LOGGED = """
import os, time
import pytest
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

LOG = os.environ["CALLS_LOG"]

@pytest.mark.parametrize("n", [1, 2, 3])
def test_logged(perf, n):
    def work():
        with open(LOG, "a") as out:
            out.write(f"{os.getpid()} {n} {time.monotonic()}\\n")
        return sum(range(20000))
    perf.measure(Workload(check="logged", params={"n": n}, metric="rate", unit="call/s",
                          work=Work(1.0, "call"), run=work))
"""


def _logged_ab(tmp_path: Path, *options: str) -> tuple[dict, Path]:
    """A 2-round A/A of the logged checks: its record, and the log of every call."""
    (tmp_path / "test_logged.py").write_text(LOGGED)
    calls = tmp_path / "calls.log"
    done = _perfsuite(
        "ab", "--a", sys.executable, "--b", sys.executable, "--min-rounds", "2",
        "--max-rounds", "2", "--seed", "1", *options, "--output-dir", "out",
        "--", "test_logged.py",
        cwd=tmp_path, env={"CALLS_LOG": str(calls)}, timeout=600,
    )  # fmt: skip
    assert done.returncode in (outcome.EXIT_OK, outcome.EXIT_INCONCLUSIVE), (
        done.stdout + done.stderr
    )
    return _record(tmp_path / "out", "ab.json"), calls


def test_sides_in_lockstep_never_measure_at_once_and_alternate_check_by_check(
    tmp_path: Path,
) -> None:
    data, calls = _logged_ab(tmp_path, "--interleave", "checks")
    assert data["plan"]["interleave"] == "checks"
    # Each (process, check): the span from its first call to its last.
    spans: dict[tuple[str, str], list[float]] = {}
    for line in calls.read_text().splitlines():
        pid, n, t = line.split()
        span = spans.setdefault((pid, n), [float(t), float(t)])
        span[1] = float(t)
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    for (_, (_, end)), (_, (start, _)) in itertools.pairwise(ordered):
        assert end < start  # one check ends before the next (of either side) starts
    assert len(ordered) == 12  # 2 rounds x 2 sides x 3 checks
    # In each round the two readings of a check are next to each other: pairs by check.
    pairs = [key[1] for key, _ in ordered]
    assert pairs == ["1", "1", "2", "2", "3", "3"] * 2
    turns = sorted((tmp_path / "out").glob("*/round-01-turns.tsv"))[0].read_text().splitlines()
    first = [line.split("\t")[1] for line in turns]
    order = data["order"][0]
    assert first == [order[0], order[1], order[1], order[0], order[0], order[1]]


@pytest.mark.parametrize("sides", ["forked", "fresh"])
def test_by_default_the_sides_alternate_sample_by_sample_and_never_measure_at_once(
    tmp_path: Path, sides: str
) -> None:
    data, calls = _logged_ab(tmp_path, "--sides", sides)
    assert data["plan"]["interleave"] == "samples"
    # Forked by default: every side of every round a fork of its side's warm interpreter.
    assert [r["forked"] for r in data["rounds"]] == [sides == "forked"] * 4
    turns = sorted((tmp_path / "out").glob("*/round-01-turns.tsv"))[0].read_text().splitlines()
    granted = [tuple(line.split("\t")[1:3]) for line in turns]
    # The broker measured every turn's foreign load (cores), and each turn pair's is kept.
    assert all(float(line.split("\t")[3]) >= 0 for line in turns)
    for run in data["rounds"]:
        assert (
            sorted(run["turn_loads"]) == sorted(run["turn_pairs"]) and len(run["turn_pairs"]) == 3
        )
        assert all(len(pairs) == 3 for pairs in run["turn_loads"].values())
    o0, o1 = data["order"][0]
    for n, at in zip((1, 2, 3), range(0, 18, 6), strict=True):
        check = f"test_logged.py::test_logged[{n}]"
        keys = [check, check, f"{check}#2", f"{check}#2", f"{check}#3", f"{check}#3"]
        sides = [o0, o1, o1, o0, o0, o1] if n != 2 else [o1, o0, o0, o1, o1, o0]
        assert granted[at : at + 6] == list(zip(sides, keys, strict=True))
    assert len(granted) == 18  # 3 checks x 3 samples x 2 sides
    # Every turn calls the check (a sample after a warm call), so the calls, in time order,
    # change process exactly where the turns change side: A | B B | A A | B B | ... and
    # never more often, which they would if the two measured at once.
    lines = [line.split() for line in calls.read_text().splitlines()]
    pids = [pid for pid, _, _ in sorted(lines, key=lambda parts: float(parts[2]))]
    runs = [pid for pid, _ in itertools.groupby(pids)]
    assert len(runs) == 2 * 10  # per round: 18 turns, 8 of them after the same side's
    for reading in data["rounds"]:
        assert all(len(r["samples"]) == 3 and not r["flags"] for r in reading["readings"].values())


FORKS = """
import os, time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_forks(perf):
    perf.measure(Workload(check="forks", params={}, metric="rate", unit="loop/s",
                          work=Work(1.0, "loop"), run=lambda: sum(range(20000))))
    if os.fork() == 0:  # a worker that outlives the side, holding every descriptor it had
        stop = os.path.join(os.path.dirname(__file__), "stop")
        for _ in range(600):  # until the test is over
            if os.path.exists(stop):
                break
            time.sleep(0.5)
        os._exit(0)
"""


def test_a_side_that_ended_frees_its_turn_though_a_child_holds_the_pipe(tmp_path: Path) -> None:
    (tmp_path / "test_forks.py").write_text(FORKS)
    started = time.monotonic()
    done = _perfsuite(
        "ab", "--a", sys.executable, "--b", sys.executable, "--min-rounds", "2",
        "--max-rounds", "2", "--output-dir", "out", "--", "test_forks.py",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    took = time.monotonic() - started
    (tmp_path / "stop").touch()  # the workers may go now
    assert done.returncode in (outcome.EXIT_OK, outcome.EXIT_INCONCLUSIVE), (
        done.stdout + done.stderr
    )
    assert took < 240  # not held until the children's 300 s are over
    data = _record(tmp_path / "out", "ab.json")
    assert not any(r["failed"] for r in data["rounds"])


def test_an_interrupt_writes_the_rounds_so_far_marked_incomplete(tmp_path: Path) -> None:
    (tmp_path / "test_loop.py").write_text(CHECK)
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_PLUGINS": STEADY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", "ab", "--a", sys.executable, "--b", sys.executable,
         "--min-rounds", "5", "--max-rounds", "5", "--output-dir", "out", "--", "test_loop.py"],
        cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("round 1/5"):
            break
    time.sleep(1.0)  # into round 2
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == outcome.EXIT_INTERRUPTED, "".join(seen) + rest
    data = _record(tmp_path / "out", "ab.json")
    assert data["incomplete"] == "interrupted during round 2"
    assert len([r for r in data["rounds"] if r["round"] == 1]) == 2
    assert "INCOMPLETE" in rest


# A healthy side takes 1.9 s on a quiet 2-core runner and 3.3 s in a whole pytest -n 2 run,
# but passed 8 s under CI's burner beside the rest of the integration tier.
SIDE_TIMEOUT_S = 30


def test_a_hung_side_is_killed_and_fails_b(tmp_path: Path) -> None:
    (tmp_path / "test_loop.py").write_text(CHECK)
    done = _perfsuite(
        "ab", "--a", sys.executable, "--b", sys.executable, "--b-env", "HANG_HERE=1",
        "--side-timeout", str(SIDE_TIMEOUT_S), "--min-rounds", "2", "--max-rounds", "2",
        "--output-dir", "out", "--", "test_loop.py",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    # A check A measures and B hangs on is a failure of B (issue 63, case 8).
    assert done.returncode == outcome.EXIT_REGRESSED, done.stdout + done.stderr
    data = _record(tmp_path / "out", "ab.json")
    assert data["broken_by_b"] == ["test_loop.py::test_loop"]
    failed = [r for r in data["rounds"] if r["failed"]]
    assert [r["side"] for r in failed] == ["B", "B"]
    assert all(f"no result within {SIDE_TIMEOUT_S} s" in r["failed"] for r in failed)
    assert data["checks"] == []
    assert f"round 1 B failed: no result within {SIDE_TIMEOUT_S} s" in done.stdout


# ---------------------------------------------------------------- bisect over local wheels

RELEASES = ["1.0", "1.1", "1.2", "1.3", "1.4"]
FIRST_SLOW = "1.2"


# The samples are fixed through the measurement seam by what the installed release declares
# a call costs, with a small scatter drawn afresh in each process.  The search, the
# environments and the rounds run for real; what each release measures does not depend on
# how busy the runner is (a real, timed slowdown is what the A/B test above injects).
FIXTURE_CLOCK = f"""
import os, random
import {MODULE}
from perfsuite.testing import FixedClock

_draw = random.Random(os.getpid())
clock = FixedClock(lambda workload: {MODULE}.COST,
                   scatter=[1.0 + _draw.uniform(-0.005, 0.005) for _ in range(8)])

def pytest_perfsuite_measured(workload, measurement):
    return clock(workload, measurement)
"""


def test_bisect_names_the_release_that_made_the_work_slower(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in RELEASES:
        # From FIRST_SLOW on, a call costs twice as much.
        cost = 0.002 if version >= FIRST_SLOW else 0.001
        write_wheel(wheels, version, f"COST = {cost}\n\ndef work():\n    return None\n")
    (tmp_path / "test_fixture.py").write_text(FIXTURE_CHECK)
    (tmp_path / "conftest.py").write_text(FIXTURE_CLOCK)
    done = _perfsuite(
        "bisect", "--package", DIST, "--good", RELEASES[0], "--bad", RELEASES[-1],
        # Twice the cost is far beyond 20%, and the fixed clock's scatter (±0.5%) lets two
        # rounds call a step without the change "same".
        "--tolerance", "0.2", "--min-rounds", "2", "--max-rounds", "6", "--output-dir", "out",
        # The fixed clock decides the samples: brief real ones do.
        "--sample-seconds", "0.005",
        "--", "test_fixture.py",
        cwd=tmp_path, timeout=1500,
        # A built environment's packages come uncompiled; where bytecode caching is off,
        # every side would compile SciPy and the rest again (over a second a side).
        env={"PIP_FIND_LINKS": str(wheels), "PERFSUITE_CACHE": str(tmp_path / "cache"),
             "PYTHONDONTWRITEBYTECODE": None},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    data = _record(tmp_path / "out", "bisect.json")
    assert data["first_bad"] == FIRST_SLOW
    assert len(data["steps"]) <= math.ceil(math.log2(len(RELEASES))) + 1
    assert f"first bad {DIST} {FIRST_SLOW}" in done.stdout
    assert (tmp_path / "out" / next((tmp_path / "out").iterdir()).name / "bisect.html").is_file()
