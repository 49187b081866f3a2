"""Issue 63's cases for ``perfsuite ab`` and ``perfsuite bisect``: one row or test per case.

The table runs ``python -m perfsuite`` in a project with one real check; each row names the
command, its exit status and the one line it must print.  Cases that need a hung or dying
side, or a signal, are integration tests below the table, still one per case (and signal).
Exit statuses are :mod:`perfsuite.judge.outcome`'s constants, never literals.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from test_bad_input import Row as BadInputRow
from wheels import DIST, MODULE, write_wheel

from perfsuite import cli
from perfsuite.ab import CheckVerdict, bisect, rounds, side_diff, stacks
from perfsuite.ab import run as ab_run
from perfsuite.judge import outcome
from perfsuite.report.ab import diff_lines

ROOT = Path(__file__).resolve().parents[1]
STEADY = "perfsuite.testing"  # each side reads a steady machine (see test_ab_processes.py)

# A check that hangs, dies by SIGSEGV or raises where its side is told to, and otherwise
# measures a small loop.  HANG_MARK names a file it creates just before it hangs.
CHECK = """
import os, signal, time
from pathlib import Path
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def work():
    if os.environ.get("HANG_HERE"):
        if os.environ.get("HANG_MARK"):
            Path(os.environ["HANG_MARK"]).touch()
        time.sleep(600)
    if os.environ.get("SEGV_HERE"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return sum(range(20000))

def test_loop(perf):
    perf.measure(Workload(check="loop", params={}, metric="rate", unit="loop/s",
                          work=Work(1.0, "loop"), run=work))
"""


def _environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_PLUGINS": STEADY, **(extra or {})}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        environ.pop(name, None)
    return environ


def _perfsuite(
    args: Sequence[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        cwd=cwd,
        env=_environ(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


# ----------------------------------------------------------------------------- the table

Setup = Callable[[Path], dict[str, str]]  # prepares the project; returns variables to set


@dataclass(frozen=True)
class Row(BadInputRow):
    """The bad-input suite's row; here each setup returns the variables to set."""

    stream: str = "stderr"  # where the fragment is: stderr (an error) or stdout (help)


def _check(root: Path) -> dict[str, str]:
    (root / "test_loop.py").write_text(CHECK)
    return {}


AB = ("ab", "--a", sys.executable, "--b", sys.executable, "--min-rounds", "2")
AB_OUT = ("--max-rounds", "3", "--output-dir", "out")


def _broken_cached_environment(root: Path) -> dict[str, str]:
    """A cached environment for ``tinypkg==1.0`` whose interpreter fails, and a stand-in uv.

    The stand-in ``uv`` (on PATH; uv is not what is under test) "builds" an environment whose
    interpreter fails too, and logs each call: the rebuild is tried once, then refused.
    """
    cache = root / "cache"
    env_root = stacks.environment_root(["tinypkg==1.0"], cache)
    (env_root / "bin").mkdir(parents=True)
    broken = "#!/bin/sh\necho 'ModuleNotFoundError: No module named pytest' >&2\nexit 1\n"
    (env_root / "bin" / "python").write_text(broken)
    (env_root / "bin" / "python").chmod(0o755)
    (env_root / stacks.MARK).write_text("{}\n")
    tools = root / "tools"
    tools.mkdir()
    uv = tools / "uv"
    uv.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {root / "uv.log"}\n'
        'if [ "$1" = venv ]; then for last; do :; done; mkdir -p "$last/bin"; '
        f'printf \'%s\' "{broken}" > "$last/bin/python"; chmod +x "$last/bin/python"; fi\n'
    )
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    return {"PERFSUITE_CACHE": str(cache), "PATH": f"{tools}:{os.environ['PATH']}"}


ROWS = [
    Row(
        "case09-k-nomatch",
        (*AB, *AB_OUT, "--", "test_loop.py", "-k", "nomatch"),
        outcome.EXIT_USAGE,
        "pytest collected no check to run",
        (_check,),
    ),
    Row(
        "case09-missing-path",
        (*AB, *AB_OUT, "--", "no_such_test.py"),
        outcome.EXIT_USAGE,
        "pytest refused its arguments: file or directory not found: no_such_test.py",
        (_check,),
    ),
    Row(
        "case09-unknown-option",
        (*AB, *AB_OUT, "--", "test_loop.py", "--no-such-option"),
        outcome.EXIT_USAGE,
        "unrecognized arguments: --no-such-option",
        (_check,),
    ),
    Row(
        "case09-collect-only",
        (*AB, *AB_OUT, "--", "test_loop.py", "--co"),
        outcome.EXIT_USAGE,
        "pytest argument --co: the sides would not run their checks",
        (_check,),
    ),
    Row(
        "case09-samples-2",
        (*AB, *AB_OUT, "--samples", "2", "--", "test_loop.py"),
        outcome.EXIT_USAGE,
        "--samples 2: give a whole number >= 3",
        (_check,),
    ),
    Row(
        "case09-sample-seconds-inf",
        (*AB, *AB_OUT, "--sample-seconds", "inf", "--", "test_loop.py"),
        outcome.EXIT_USAGE,
        "--sample-seconds inf: give seconds > 0 and <= 60",
        (_check,),
    ),
    Row(
        "case12-broken-cached-env",
        ("ab", "--a", "tinypkg==1.0", "--b", sys.executable, *AB_OUT, "--", "test_loop.py"),
        outcome.EXIT_USAGE,
        "is broken: 'import pytest, perfsuite.ab.side' failed: ModuleNotFoundError",
        (_check, _broken_cached_environment),
    ),
    Row(
        "also-bisect-help-html",
        ("bisect", "--help"),
        outcome.EXIT_OK,
        "bisect.html is always written",
        stream="stdout",
    ),
    Row(
        "also-ab-help-output-dir",
        ("ab", "--help"),
        outcome.EXIT_OK,
        "(default: reports/ab)",
        stream="stdout",
    ),
    Row(
        "also-bisect-help-output-dir",
        ("bisect", "--help"),
        outcome.EXIT_OK,
        "(default: reports/bisect)",
        stream="stdout",
    ),
    Row(
        "also-ab-help-side-timeout",
        ("ab", "--help"),
        outcome.EXIT_OK,
        "(default: 1800)",
        stream="stdout",
    ),
    Row(
        "also-ab-help-pytest-args",
        ("ab", "--help"),
        outcome.EXIT_OK,
        "everything after -- goes to pytest on both sides",
        stream="stdout",
    ),
]


@pytest.mark.integration
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_ab_and_bisect_refuse_bad_input(row: Row, tmp_path: Path) -> None:
    env: dict[str, str] = {}
    for setup in row.setup:
        env.update(setup(tmp_path))
    done = _perfsuite(row.args, tmp_path, env)
    said = done.stderr if row.stream == "stderr" else done.stdout
    assert done.returncode == row.exit, done.stdout[-3000:] + done.stderr[-3000:]
    assert row.fragment in " ".join(said.split()), said[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    if row.exit == outcome.EXIT_USAGE:
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("perfsuite: error: "), done.stderr
        # At most one attempt: round 1 and no further round.
        assert not list(tmp_path.glob("out/*/round-02-*")), done.stdout
        assert "round 2/" not in done.stdout


def test_case12_a_broken_cached_environment_is_rebuilt_exactly_once(tmp_path: Path) -> None:
    """The table's row: the stand-in uv was asked to build once, not in a loop."""
    env = _broken_cached_environment(tmp_path)
    _check(tmp_path)
    done = _perfsuite(
        ["ab", "--a", "tinypkg==1.0", "--b", sys.executable, *AB_OUT, "--", "test_loop.py"],
        tmp_path,
        env,
    )
    assert done.returncode == outcome.EXIT_USAGE, done.stderr
    assert str(tmp_path / "cache" / "envs") in done.stderr
    calls = (tmp_path / "uv.log").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["venv", "pip"]


def test_case12_a_healthy_rebuild_replaces_a_broken_cached_environment(tmp_path: Path) -> None:
    built: list[str] = []

    def run(cmd: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        if cmd[-1] == stacks.HEALTH_CODE:  # healthy only once rebuilt
            ok = bool(built)
            return subprocess.CompletedProcess(list(cmd), 0 if ok else 1, "", "no pytest")
        if "venv" in cmd:
            built.append(cmd[-1])
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
            (Path(cmd[-1]) / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(list(cmd), 0, "", "")

    root = stacks.environment_root(["tinypkg==1.0"], tmp_path)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("")
    (root / stacks.MARK).write_text("{}\n")
    python, cached, _ = stacks.build_environment(["tinypkg==1.0"], tmp_path, run)
    assert not cached and built == [str(root)] and python == root / "bin" / "python"


# ---------------------------------------------------------------- case 8: B crashes or hangs


@pytest.mark.integration
@pytest.mark.parametrize(
    ("variable", "reason"),
    [("SEGV_HERE", "killed by SIGSEGV"), ("HANG_HERE", "no result within 30 s (killed)")],
    ids=["case08-b-segfaults", "case08-b-hangs"],
)
def test_case08_a_b_that_dies_on_a_check_a_measures_fails_b(
    tmp_path: Path, variable: str, reason: str
) -> None:
    _check(tmp_path)
    done = _perfsuite(
        # A healthy side passed 8 s under CI's burner; 30 s leaves room and still ends.
        [*AB, "--max-rounds", "2", "--b-env", f"{variable}=1", "--side-timeout", "30",
         "--output-dir", "out", "--", "test_loop.py"],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == outcome.EXIT_REGRESSED, done.stdout[-3000:] + done.stderr
    assert f"{reason} in test_loop.py::test_loop" in done.stdout
    assert "B FAILED on 1 check that A measured" in done.stdout
    (record,) = tmp_path.glob("out/*/ab.json")
    assert json.loads(record.read_text())["broken_by_b"] == ["test_loop.py::test_loop"]


# ---------------------------------------------------------------- case 7: signals


def _tagged(tag: str) -> list[psutil.Process]:
    """Every process whose environment carries ``tag`` (started by the command under test)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("PERFSUITE_TEST_TAG") == tag:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _as_at_a_terminal() -> None:
    """SIGINT and SIGHUP reach the child as they do a terminal's foreground job.

    A test run under ``nohup`` (or a runner that ignores them) would otherwise pass the
    ignored SIGHUP on, and the command rightly keeps an ignored signal ignored.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@dataclass
class Interrupted:
    """What a signalled command left: its exit, output, and the processes and folders."""

    returncode: int
    output: str
    before: int  # tagged processes when the signal was sent (the command and its children)
    after: int  # tagged processes still there after it exited
    temp_left: list[str]


def _interrupt(args: Sequence[str], cwd: Path, sig: int, env: dict[str, str]) -> Interrupted:
    """Start ``perfsuite ARGS``, wait until a side hangs, send ``sig``, and see what is left."""
    tag = uuid.uuid4().hex
    temp = cwd / "tmp"
    temp.mkdir()
    mark = cwd / "hanging"
    environ = _environ(
        {**env, "PERFSUITE_TEST_TAG": tag, "TMPDIR": str(temp), "HANG_MARK": str(mark)}
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", *args],
        cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_as_at_a_terminal,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 900
        while not mark.exists():
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the side never reached its hang"
            time.sleep(0.2)
        before = len(_tagged(tag))
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The command has exited: whatever it started must be gone (give a kill a moment).
    deadline = time.monotonic() + 10
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    after = len(_tagged(tag))
    return Interrupted(proc.returncode, output, before, after, _temp_left(temp))


# The sides' compiled reference kernels and bandwidth reading: a cache kept on purpose across
# runs (perfsuite.measure.native, perfsuite.hardware.bandwidth), not a temporary folder.  What an
# interrupted build of it would leave (a ``.NAME-DIGEST-PID.so`` partial) still counts.  So
# does every folder, but not the empty lock file uv keeps after a build it finished.
KEPT_CACHE = f"perfsuite-ref-{os.getuid()}"


def _temp_left(temp: Path) -> list[str]:
    """What is left under the command's TMPDIR, less the kept cache's finished entries."""
    left = []
    for path in sorted(temp.rglob("*")):
        relative = path.relative_to(temp)
        if relative.parts[0] == KEPT_CACHE and not path.name.startswith("."):
            continue
        if len(relative.parts) == 1 and path.name.startswith("uv-") and path.suffix == ".lock":
            continue  # uv's own lock file, left by every uv build that completed
        left.append(str(relative))
    return left


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _report(what: str, sig: int, got: Interrupted) -> None:
    """The counts the issue asks for, in the test's output (-rP or -s shows them)."""
    print(
        f"{what} {signal.Signals(sig).name}: tagged processes before {got.before}, after "
        f"{got.after}; temporary entries left {len(got.temp_left)}"
    )


@pytest.mark.integration
@pytest.mark.parametrize("sig", SIGNALS, ids=[f"case07-ab-{s.name}" for s in SIGNALS])
def test_case07_a_signal_to_ab_ends_every_side_and_writes_the_rounds_so_far(
    tmp_path: Path, sig: signal.Signals
) -> None:
    _check(tmp_path)
    got = _interrupt(
        [*AB, "--max-rounds", "3", "--b-env", "HANG_HERE=1", "--output-dir", "out",
         "--", "test_loop.py"],
        tmp_path, sig, {},
    )  # fmt: skip
    _report("ab", sig, got)
    assert got.returncode == outcome.EXIT_INTERRUPTED, got.output[-3000:]
    assert got.before >= 3  # perfsuite ab and both sides
    assert got.after == 0
    assert got.temp_left == []
    (record,) = tmp_path.glob("out/*/ab.json")
    data = json.loads(record.read_text())
    assert data["incomplete"] == "interrupted during round 1"
    assert data["exit_status"] == outcome.EXIT_INTERRUPTED
    assert "perfsuite ab: INTERRUPTED" in got.output


RELEASES = ("1.0", "1.1")
RELEASE = """
import os, time
from pathlib import Path

def work():
    if os.environ.get("HANG_HERE"):
        Path(os.environ["HANG_MARK"]).touch()
        time.sleep(600)
    return sum(range(2000))
"""
BISECT_CHECK = f"""
import {MODULE}
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_fixture_work(perf):
    perf.measure(Workload(check="fixture_work", params={{}}, metric="rate", unit="call/s",
                          work=Work(1.0, "call"), run={MODULE}.work))
"""


@pytest.fixture(scope="module")
def release_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Wheels of two releases and one environment cache, shared by the bisect signal tests."""
    root = tmp_path_factory.mktemp("releases")
    wheels = root / "wheels"
    wheels.mkdir()
    for version in RELEASES:
        write_wheel(wheels, version, RELEASE)
    yield wheels, root / "cache"


@pytest.mark.integration
@pytest.mark.parametrize("sig", SIGNALS, ids=[f"case07-bisect-{s.name}" for s in SIGNALS])
def test_case07_a_signal_to_bisect_ends_every_side_and_names_the_step(
    tmp_path: Path, sig: signal.Signals, release_cache: tuple[Path, Path]
) -> None:
    wheels, cache = release_cache
    (tmp_path / "test_fixture.py").write_text(BISECT_CHECK)
    got = _interrupt(
        ["bisect", "--package", DIST, "--good", RELEASES[0], "--bad", RELEASES[-1],
         "--min-rounds", "2", "--max-rounds", "3", "--b-env", "HANG_HERE=1",
         "--output-dir", "out", "--", "test_fixture.py"],
        tmp_path, sig,
        {"PIP_FIND_LINKS": str(wheels), "PERFSUITE_CACHE": str(cache)},
    )  # fmt: skip
    _report("bisect", sig, got)
    assert got.returncode == outcome.EXIT_INTERRUPTED, got.output[-3000:]
    assert got.before >= 3
    assert got.after == 0
    assert got.temp_left == []
    (record,) = tmp_path.glob("out/*/bisect.json")
    data = json.loads(record.read_text())
    assert data["incomplete"].startswith("interrupted inside step 1 ")
    assert [s["interrupted"] for s in data["steps"]] == [True]
    assert "nothing regressed" not in got.output
    (step,) = tmp_path.glob("out/*/step-01-*/ab.json")
    assert json.loads(step.read_text())["incomplete"] == "interrupted during round 1"


# ---------------------------------------------------------------- case 11: bisect's step


class _InterruptedAt:
    """A/B steps that are all the same, except that step ``at`` is interrupted."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0

    def __call__(self, options: ab_run.Options) -> Any:
        self.calls += 1
        incomplete = "interrupted during round 2" if self.calls == self.at else ""
        regressed = "regressed" if options.selection is None or self.calls == 2 else "same"
        checks = [CheckVerdict("gemm", "TFLOP/s", True, 0.05, (1,), (), None, regressed)]
        if incomplete:  # unfinished: the verdict so far is no finding
            checks = [dataclasses.replace(checks[0], verdict="same")]
        session = rounds.Session(order=[("A", "B")] * 2, seconds=5.0, incomplete=incomplete)
        return SimpleNamespace(checks=checks, session=session, record=Path("x.json"))


def _bisect_with(tmp_path: Path, fake: _InterruptedAt) -> bisect.Search:
    ab = ab_run.Options("", "", ("suites/",), rounds.Plan())
    options = bisect.BisectOptions("tinypkg", "1.0", "1.3", (), ab, tmp_path)

    def resolve(spec: str, cache: Path | None) -> stacks.Stack:
        return stacks.Stack(spec, "requirements", sys.executable, (spec,), 0.0, True)

    return bisect.bisect(
        options, lambda _: ["1.0", "1.1", "1.2", "1.3"], fake, lambda _: None, resolve
    )


@pytest.mark.parametrize("at", [1, 2], ids=["case11-inside-step-1", "case11-inside-step-2"])
def test_case11_a_bisect_interrupted_inside_a_step_names_that_step(tmp_path: Path, at: int) -> None:
    search = _bisect_with(tmp_path, _InterruptedAt(at))
    assert search.incomplete.startswith(f"interrupted inside step {at} ")
    assert search.exit_status == outcome.EXIT_INTERRUPTED
    assert search.steps[-1].interrupted and len(search.steps) == at
    lines = bisect.summary_lines(search)
    assert not any("nothing regressed" in line for line in lines), lines
    assert not any("none regressed" in line for line in lines), lines


# ---------------------------------------------------------------- case 10: the environment


def test_case10_no_fingerprint_is_never_the_same_environment() -> None:
    fingerprint = {"software": {"python": {"version": "3.12"}}}
    lines = diff_lines(side_diff(fingerprint, {}, {}, {}), ("B",))
    assert lines == [
        "environment diff: B gave no environment fingerprint; the environments cannot be "
        "compared (the side variables and requirements are the same)"
    ]
    assert not any("same environment" in line for line in lines)


def test_case10_bisect_sides_differ_in_the_bisected_package() -> None:
    fingerprint = {"software": {"python": {"version": "3.12"}}}
    diff = side_diff(fingerprint, fingerprint, {}, {}, (("tinypkg==1.0",), ("tinypkg==1.3",)))
    lines = diff_lines(diff)
    assert "  requirement tinypkg: tinypkg==1.0 -> tinypkg==1.3" in lines
    assert not any("same environment" in line for line in lines)
    assert diff_lines(side_diff(fingerprint, fingerprint, {}, {})) == [
        "environment diff: A and B report the same environment"
    ]


# ---------------------------------------------------------------- also seen: the round cap


def test_also_a_round_cap_with_budget_left_names_max_rounds(tmp_path: Path) -> None:
    session = rounds.Session(stopped="round cap", seconds=221.0)
    note = ab_run.stop_note(session, rounds.Plan(max_rounds=20, budget_s=240.0))
    assert "--max-rounds" in note and "19 s of the budget left" in note


@pytest.mark.parametrize(
    "budget_s", [600.0, 240.0, 3600.0, 90.0, 590.5, 5400.0, 599.6, 1234567.0, 9999999.0]
)
def test_also_a_budget_stop_names_a_budget_the_option_reads_back(budget_s: float) -> None:
    session = rounds.Session(stopped="budget", seconds=budget_s - 1)
    note = ab_run.stop_note(session, rounds.Plan(max_rounds=20, budget_s=budget_s))
    given = note.split("(--budget ", 1)[1].split(")", 1)[0]
    assert ab_run.parse_budget(given) == budget_s


def test_also_every_ab_and_bisect_argument_has_help_with_its_default() -> None:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name in ("ab", "bisect"):
        sub = subparsers.choices[name]  # type: ignore[attr-defined]
        for action in sub._actions:
            if action.dest == "help":
                continue
            assert action.help, f"{name} {action.dest} has no help"
            default = action.default
            if action.required or default in (None, [], False) or action.dest == "func":
                continue
            assert "default" in action.help or f"({default})" in action.help, (
                f"{name} {action.option_strings}: {action.help!r} shows no default"
            )
