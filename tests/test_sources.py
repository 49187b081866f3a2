"""Sample sources: the in-process clock, child processes printing JSON lines, device events."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil
import pytest

from perfsuite.measure import loop as measure_module
from perfsuite.measure import sources as sources_module
from perfsuite.measure.loop import Bare, Policy, Workload, measure
from perfsuite.measure.sources import (
    ChildSource,
    ClockSource,
    EventSource,
    MarkedClock,
    SourceError,
    first_call,
    run_child,
)
from perfsuite.model import Work


class FakeTime:
    """The measuring loop's clock, moved only by what a workload says it took.

    A test of the loop's logic (warm-up windows, pairing, calibration) then sees the same
    durations on a quiet machine and on a busy one; nothing here waits on the real clock.
    """

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    monotonic = perf_counter

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    for module in (measure_module, sources_module):
        monkeypatch.setattr(module, "time", fake)
    return fake


FIXTURES = Path(__file__).parent / "fixtures"

CHILD = """
import json, sys, time
print("starting up")  # not a sample
print(json.dumps({"layout": {"hosts": 1, "ranks": 2}}))
for rank in (0, 1):
    for i in range(4):
        print(json.dumps({"rank": rank, "seconds": 0.001 * (1 + rank)}))
"""


def _workload(source: object = None) -> Workload:
    return Workload(
        check="child",
        params={},
        metric="latency",
        unit="us",
        work=Work(1.0, "operation"),
        run=lambda: None,
        scale=1e-6,
        higher_is_better=False,
        source=source,  # type: ignore[arg-type]
    )


@pytest.mark.integration  # a real child process
def test_child_samples_are_read_from_json_lines() -> None:
    source = ChildSource([sys.executable, "-c", CHILD], timeout_s=30)
    m = measure(_workload(source), Policy(warmup=1, repetitions=5))
    assert len(m.seconds) == 8 and sorted(set(m.seconds)) == [0.001, 0.002]
    assert m.source["kind"] == "child-jsonl" and m.source["ranks"] == 2
    assert m.source["facts"] == [{"layout": {"hosts": 1, "ranks": 2}}]


@pytest.mark.smoke
@pytest.mark.integration  # a real child process
def test_a_hung_child_is_killed_with_its_group_and_named() -> None:
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid, flush=True)\n"
        "sys.stderr.write('rank 1: waiting for rank 0\\n'); sys.stderr.flush()\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"(?s)no result within 2 s.*waiting for rank 0"):
        run_child([sys.executable, "-c", code], timeout_s=2)
    assert time.monotonic() - start < 15
    time.sleep(0.2)
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "time.sleep(60)" in " ".join(p.info["cmdline"] or [])
    ]
    assert not leftovers


@pytest.mark.integration  # a real child process
def test_a_failing_child_reports_its_status_and_stderr() -> None:
    with pytest.raises(SourceError, match=r"(?s)exited with status 3.*bad rank"):
        run_child(
            [sys.executable, "-c", "import sys; sys.stderr.write('bad rank'); sys.exit(3)"], 10
        )
    with pytest.raises(SourceError, match="cannot start"):
        run_child(["/nonexistent/mpiexec"], 10)
    with pytest.raises(SourceError, match="printed no samples"):
        ChildSource([sys.executable, "-c", "print('{}')"]).durations(
            lambda: None, lambda: None, 0, 1
        )


class CpuEvent:
    """An event with the torch.cuda.Event interface, on the host clock."""

    def __init__(self) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = sources_module.time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: CpuEvent) -> float:
        return (end.t - self.t) * 1e3


def test_event_source_times_each_repetition_between_event_pairs(clock: FakeTime) -> None:
    calls: list[int] = []
    source = EventSource(CpuEvent, device="cpu-events")
    durations = source.durations(lambda: (calls.append(1), clock.sleep(0.002)), lambda: None, 2, 4)
    assert len(calls) == 6 and durations == pytest.approx([0.002] * 4)
    assert source.describe() == {"kind": "device-events", "device": "cpu-events"}


def test_clock_source_describes_itself() -> None:
    assert ClockSource().describe()["kind"] == "clock"


def test_a_marked_clock_reads_each_timed_repetition_at_its_steps_mark(clock: FakeTime) -> None:
    marked = MarkedClock()
    phases = iter([True, False] * 8)

    def step() -> None:  # 2 ms, the mark, 3 ms; every other step sets no mark
        clock.sleep(0.002)
        if next(phases):
            marked.mark()
        clock.sleep(0.003)

    durations = marked.durations(step, lambda: None, 2, 4)
    # The warm-up's steps (the first two) leave no mark; a step without one is all first phase.
    assert durations == pytest.approx([0.005] * 4)
    assert marked.marks == pytest.approx([0.002, 0.005, 0.002, 0.005])
    assert marked.describe()["kind"] == "clock-marked"


def test_a_marked_clock_in_the_loop_keeps_a_mark_per_sample_only(clock: FakeTime) -> None:
    marked = MarkedClock()

    def run() -> None:
        clock.sleep(0.001)
        marked.mark()
        clock.sleep(0.004)

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=run
    )  # fmt: skip
    m = measure(work, Policy(warmup=1, repetitions=3), marked)
    assert m.seconds == pytest.approx((0.005,) * 3)
    assert marked.marks == pytest.approx([0.001] * 3)  # not the calibration's, not the warm-up's


def test_a_first_call_is_timed_alone_with_nothing_before_it(clock: FakeTime) -> None:
    calls: list[float] = []

    def cold() -> int:
        calls.append(clock.now)
        clock.sleep(0.25 if len(calls) == 1 else 0.001)  # the first call pays for the set-up
        return 7

    assert first_call(cold) == pytest.approx(0.25)
    assert len(calls) == 1


@pytest.mark.integration  # a real child process
def test_the_source_is_recorded_with_the_result(pytester: pytest.Pytester) -> None:
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_quick = true\nperf_hw = slowgpu\n"
    )
    pytester.makepyfile(
        test_child=f"""
import sys
from perfsuite.measure.loop import Workload
from perfsuite.model import Work
from perfsuite.measure.sources import ChildSource

def test_ranks(perf):
    perf.measure(Workload(
        check="child", params={{}}, metric="latency", unit="us", work=Work(1.0, "operation"),
        run=lambda: None, scale=1e-6, higher_is_better=False,
        source=ChildSource([sys.executable, "-c", {CHILD!r}]),
    ))
"""
    )
    pytester.runpytest().assert_outcomes(passed=1)
    (path,) = (pytester.path / "reports" / "slowgpu").glob("*.json")
    (result,) = json.loads(path.read_text())["results"]
    assert result["source"]["kind"] == "child-jsonl" and result["direction"] == "latency"
    assert sorted(set(result["samples"])) == pytest.approx([1000.0, 2000.0])  # microseconds
    assert os.environ.get("PERFSUITE_SESSION_PID")  # the controller names its tree


def test_a_long_measurement_opens_a_progress_bar_that_ticks_once_per_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextlib

    from perfsuite.measure import loop as measuring

    ticks: list[int] = []
    opened: list[tuple[int, float]] = []

    @contextlib.contextmanager
    def bar(samples: int, expected: float):
        opened.append((samples, expected))
        yield lambda: ticks.append(1)

    work = Workload("c", {}, "m", "u", Work(1.0, "op"), run=lambda: None)
    policy = Policy(warmup=2, repetitions=4)
    monkeypatch.setattr(measuring, "PROGRESS_SECONDS", float("inf"))
    measure(work, policy, progress=bar)
    assert opened == [], "a short measurement shows no bar"
    monkeypatch.setattr(measuring, "PROGRESS_SECONDS", 0.0)
    m = measure(work, policy, progress=bar)
    assert opened[0][0] == 6 and len(ticks) == 6  # 2 warm-ups and 4 samples
    assert len(m.seconds) == 4


def _counting_workload(capture: object) -> tuple[Workload, list[str]]:
    calls: list[str] = []
    work = Workload(
        check="c", params={}, metric="m", unit="u", work=Work(1, "op", "one call"),
        run=lambda: calls.append("run"), capture=capture,  # type: ignore[arg-type]
    )  # fmt: skip
    return work, calls


def test_a_captured_sample_replays_its_calls_instead_of_calling_run() -> None:
    replays: list[int] = []

    def capture(run: object, calls: int) -> object:
        return lambda: replays.append(calls)

    work, calls = _counting_workload(capture)
    policy = Policy(warmup=1, repetitions=3, warmup_seconds=0.0, sample_seconds=0.001)
    m = measure(work, policy)
    assert m.launch == "graph"
    assert len(replays) == 1 + 3  # the warm-up and each sample replay the capture once
    assert set(replays) == {m.calls}
    assert len(calls) <= 3  # the calibration's single calls only


def test_a_capture_that_fails_measures_calls_launched_from_the_host_and_says_why() -> None:
    def capture(run: object, calls: int) -> object:
        raise RuntimeError("operation not permitted when stream is capturing")

    work, calls = _counting_workload(capture)
    m = measure(work, Policy(warmup=1, repetitions=3, warmup_seconds=0.0, sample_seconds=0.0))
    assert m.launch.startswith("host (capture failed: RuntimeError: operation not permitted")
    assert len(m.values) == 3 and len(calls) >= 4


def test_a_frameworks_warnings_are_recorded_and_never_fail_the_check(
    pytester: pytest.Pytester,
) -> None:
    """Inductor's TF32 advice, raised under ``-W error``, once failed torch's compile knob."""
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini(
        "[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\nperf_quick = true\nperf_hw = slowgpu\nfilterwarnings = error\n"
    )
    pytester.makepyfile(
        test_warns="""
import warnings
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def build():
    warnings.warn("built with a deprecated option", DeprecationWarning)
    return Workload(
        check="warns", params={}, metric="rate", unit="op/s", work=Work(1.0, "operation"),
        run=lambda: warnings.warn("TensorFloat32 tensor cores available but not enabled"),
    )

def test_warns(perf):
    perf.measure(build)
"""
    )
    pytester.runpytest().assert_outcomes(passed=1)
    (path,) = (pytester.path / "reports" / "slowgpu").glob("*.json")
    (result,) = json.loads(path.read_text())["results"]
    assert result["framework_warnings"] == [
        "DeprecationWarning: built with a deprecated option",
        "UserWarning: TensorFloat32 tensor cores available but not enabled",
    ]


def test_perfsuites_own_warnings_pass_through_the_framework_warning_record() -> None:
    from perfsuite.fixture import _PACKAGE, framework_warnings

    seen: list[str] = []
    with pytest.warns(UserWarning, match="perfsuite's own"):
        with framework_warnings(seen):
            for _ in range(1000):  # one place, many calls: kept once
                warnings.warn("a framework's advice", FutureWarning, stacklevel=1)
            warnings.warn_explicit("perfsuite's own", UserWarning, str(_PACKAGE / "measure.py"), 1)
    assert seen == ["FutureWarning: a framework's advice"]


def _slow_start_workload(clock: FakeTime) -> tuple[Workload, list[int]]:
    """A workload whose calls start slow and speed up: call n takes 1 ms + 20 ms / n."""
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        clock.sleep(0.001 + 0.02 / len(calls))

    return (
        Workload(check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=run),
        calls,
    )


def test_warm_up_goes_on_until_the_rate_settles(clock: FakeTime) -> None:
    """A slow start longer than the fixed minimum is warmed through, not timed."""
    work, calls = _slow_start_workload(clock)
    policy = Policy(
        warmup=0, repetitions=3, warmup_seconds=0.01, sample_seconds=0.02, warmup_max_seconds=5.0
    )
    m = measure(work, policy)
    assert m.warmup_settled is True
    assert m.warmup_windows[0] > 3 * m.warmup_windows[-1]  # the windows saw the change
    # the two last windows agree within the policy's settle tolerance
    assert abs(m.warmup_windows[-1] / m.warmup_windows[-2] - 1) < 0.2
    fixed_work, fixed_calls = _slow_start_workload(clock)
    fixed = measure(fixed_work, replace(policy, warmup_max_seconds=0))
    assert fixed.warmup_windows == () and fixed.warmup_settled is None
    assert len(calls) > len(fixed_calls)  # the settling windows ran on past the minimum
    assert min(m.values) > max(fixed.values)  # and the samples met the faster calls


def test_a_rate_that_never_settles_stops_at_the_cap_and_says_so(clock: FakeTime) -> None:
    """A workload that keeps slowing down ends the warm-up at its cap, marked unsettled."""
    calls = [0]

    def run() -> None:
        calls[0] += 1
        clock.sleep(0.0002 * 1.25 ** calls[0])  # every call 25% slower than the one before

    work = Workload(check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=run)
    policy = Policy(
        warmup=0, repetitions=2, warmup_seconds=0.0, sample_seconds=0.02, warmup_max_seconds=0.3
    )
    m = measure(work, policy)
    assert m.warmup_settled is False and len(m.warmup_windows) >= 2
    assert list(m.warmup_windows) == sorted(m.warmup_windows)
    assert m.warmup_s >= 0.3


def test_a_zero_settle_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid policy"):
        Policy(warmup=0, repetitions=3, warmup_settle=0.0)


def _drifting_pair(log: list[str], clock: FakeTime) -> tuple[Workload, Bare]:
    """A check at half its reference's speed, on a machine whose speed changes between pairs.

    The machine's slowdown (1x to 4x) is drawn afresh whenever the reference starts after
    the check has run.
    """
    rng = np.random.default_rng(0)
    factor = [1.0]

    def check() -> None:
        log.append("c")
        clock.sleep(0.004 * factor[0])

    def bare() -> None:
        if not log or log[-1] == "c":
            factor[0] = float(rng.choice([1.0, 2.0, 3.0, 4.0]))
        log.append("r")
        clock.sleep(0.002 * factor[0])

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=check,
        bare=Bare("the op, bare", bare, 1.0, "op/s"),
    )  # fmt: skip
    return work, bare_of(work)


def bare_of(work: Workload) -> Bare:
    assert work.bare is not None
    return work.bare


def test_a_bare_reference_is_sampled_right_before_each_check_sample(clock: FakeTime) -> None:
    """Reference and check samples alternate, so each pair sees one state of the machine."""
    log: list[str] = []
    work, _ = _drifting_pair(log, clock)
    policy = Policy(warmup=1, repetitions=6, warmup_seconds=0.01, sample_seconds=0.01)
    m = measure(work, policy)
    runs = [key for key, _ in itertools.groupby(log)]
    # warm-ups and calibration first (reference, then check), then 7 pairs (1 warm-up round)
    assert runs[-14:] == ["r", "c"] * 7
    assert m.bare is not None and m.bare["paired"] is True
    assert len(m.bare["samples"]) == len(m.bare["pair_ratios"]) == 6
    for ratio, value, ref in zip(m.bare["pair_ratios"], m.values, m.bare["samples"], strict=True):
        assert ratio == pytest.approx(value / ref)
    # the machine moved 1x-4x between pairs; within a pair it did not, and the check runs
    # at half the reference's speed (unpaired, a ratio could be anywhere in 1/8-2)
    assert 0.4 < statistics.median(m.bare["pair_ratios"]) < 0.6
    assert all(0.25 < r < 0.8 for r in m.bare["pair_ratios"])
    assert max(m.values) / min(m.values) > 1.5  # the drift was there, in both


def test_a_source_that_takes_its_samples_at_once_gets_unpaired_reference_samples(
    clock: FakeTime,
) -> None:
    """Device event timers queue every sample after one hook: the reference follows, unpaired."""
    log: list[str] = []
    work, _ = _drifting_pair(log, clock)
    work = replace(work, source=EventSource(CpuEvent, device="cpu-events"))
    m = measure(work, Policy(warmup=1, repetitions=4, sample_seconds=0.01))
    assert m.bare is not None and m.bare["paired"] is False and "pair_ratios" not in m.bare
    assert len(m.bare["samples"]) == 4


def test_a_reference_that_cannot_be_built_is_recorded_with_why_and_never_timed(
    clock: FakeTime,
) -> None:
    log: list[str] = []
    work, _ = _drifting_pair(log, clock)
    work = replace(work, bare=Bare("C STREAM", unavailable="no C compiler (cc not found)"))
    m = measure(work, Policy(warmup=0, repetitions=2, sample_seconds=0.005))
    assert m.bare == {"what": "C STREAM", "unavailable": "no C compiler (cc not found)"}
    assert "r" not in log


def test_pairs_skip_the_warm_up_rounds_and_a_hook_after_the_samples() -> None:
    """The samples paired are those taken after the warm-up rounds' hooks and before any later.

    pytest-benchmark's ``--benchmark-cprofile`` calls the pre-sample hook once more after the
    timed rounds; that sample must not shift the pairs.
    """
    from perfsuite.measure.loop import _BareSamples

    samples = _BareSamples(Bare("ref", lambda: None, 1.0, "op/s"))
    samples.seconds = [9.0, 1.0, 2.0, 4.0, 9.0]  # warm-up, three pairs, one after
    samples.before_check = 5
    entry = samples.entry((1.0, 1.0, 1.0), warmup=1)
    assert entry["paired"] is True and entry["samples"] == [1.0, 0.5, 0.25]
    assert entry["pair_ratios"] == [1.0, 2.0, 4.0]


def test_a_reference_that_fails_is_dropped_with_the_reason_and_the_check_goes_on(
    clock: FakeTime,
) -> None:
    calls = [0]

    def flaky() -> None:
        calls[0] += 1
        clock.sleep(0.001)
        if calls[0] > 12:
            raise RuntimeError("device lost\nmore detail")

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"),
        run=lambda: clock.sleep(0.001), bare=Bare("the op, bare", flaky, 1.0, "op/s"),
    )  # fmt: skip
    m = measure(work, Policy(warmup=0, repetitions=4, sample_seconds=0.005))
    assert len(m.values) == 4
    assert m.bare == {
        "what": "the op, bare",
        "unavailable": "the reference failed: RuntimeError: device lost",
    }


def test_a_latency_check_gets_no_rate_reference(clock: FakeTime) -> None:
    log: list[str] = []
    work, _ = _drifting_pair(log, clock)
    m = measure(replace(work, higher_is_better=False), Policy(warmup=0, repetitions=2))
    assert m.bare is not None and "is a latency" in m.bare["unavailable"] and "r" not in log


def test_settling_windows_fit_the_warm_up_however_long_a_sample(clock: FakeTime) -> None:
    """A 30 s sample length still leaves two settling windows inside a 0.2 s warm-up cap."""
    from perfsuite.measure.loop import warm_up

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"),
        run=lambda: clock.sleep(0.001),
    )  # fmt: skip
    policy = Policy(
        warmup=0, repetitions=1, warmup_seconds=0.0, sample_seconds=30.0, warmup_max_seconds=0.2
    )
    warm = warm_up(work, policy)
    assert len(warm.windows) >= 2  # a 30 s window would have been one, and 30 s long


def test_between_samples_another_process_may_run_and_each_sample_is_warmed_again(
    clock: FakeTime,
) -> None:
    """``between`` comes before every timed sample but the first; one untimed call follows.

    One call, not a sample's worth: it brings the workload back into the caches the other
    process used, and a sample of many calls would double the side's time per sample.
    """
    log: list[str] = []

    def run() -> None:
        log.append("call")
        clock.sleep(0.001)

    def between(sample: int) -> None:
        log.append(f"between {sample}")
        clock.sleep(5.0)  # the other process's turn: never inside a sample

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=run,
        sync=lambda: log.append("sync"),
    )  # fmt: skip
    # a sample of 5 calls of 1 ms
    policy = Policy(warmup=1, repetitions=4, warmup_seconds=0.0, sample_seconds=0.0045)
    m = measure(work, policy, ClockSource(), between=between)
    assert m.calls == 5
    assert [entry for entry in log if entry.startswith("between")] == [
        "between 2", "between 3", "between 4"
    ]  # fmt: skip
    for sample in (2, 3, 4):  # one warm call and its sync, the sample's sync, then the sample
        at = log.index(f"between {sample}")
        assert log[at + 1 : at + 10] == ["sync", "call", "sync", "sync", *["call"] * 5]
    assert m.seconds == pytest.approx((0.005,) * 4)
    assert m.waited_s == pytest.approx(15.0)  # the three turns, outside the samples


def test_a_source_with_no_moment_between_samples_never_hands_over(clock: FakeTime) -> None:
    calls: list[int] = []
    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"),
        run=lambda: clock.sleep(0.001), source=EventSource(CpuEvent, device="cpu-events"),
    )  # fmt: skip
    policy = Policy(warmup=1, repetitions=3, warmup_seconds=0.0, sample_seconds=0.0)
    measure(work, policy, between=calls.append)
    assert calls == []


def test_after_a_hand_over_the_bare_reference_is_warmed_again_too(clock: FakeTime) -> None:
    log: list[str] = []
    work, _ = _drifting_pair(log, clock)
    policy = Policy(warmup=1, repetitions=3, warmup_seconds=0.01, sample_seconds=0.01)
    measure(work, policy, ClockSource(), between=lambda sample: log.append(f"between {sample}"))
    # Before sample 1 the reference takes one sample; after a hand-over, a warm one first.
    at = log.index("between 2")
    before = [(key, len(list(run))) for key, run in itertools.groupby(log[:at])]
    one_sample = before[-2][1]  # ... reference sample, check sample 1 | between 2
    assert before[-2][0] == "r" and before[-1][0] == "c"
    for sample in (2, 3):  # the check warmed, the reference warmed and sampled, the check
        at = log.index(f"between {sample}")
        runs = [(key, len(list(run))) for key, run in itertools.groupby(log[at + 1 :])]
        assert [key for key, _ in runs[:3]] == ["c", "r", "c"]
        assert runs[1][1] == 2 * one_sample


def _timed_calls(clock: FakeTime, took: list[float]) -> tuple[Workload, list[float]]:
    """A workload whose successive calls take ``took``'s seconds; the calls made."""
    made: list[float] = []

    def run() -> None:
        seconds = took[min(len(made), len(took) - 1)]
        made.append(seconds)
        clock.sleep(seconds)

    work = Workload(
        check="w", params={}, metric="rate", unit="op/s", work=Work(1.0, "op"), run=run
    )  # fmt: skip
    return work, made


def test_calibration_takes_the_best_of_three_calls(clock: FakeTime) -> None:
    """One slow call (an interruption) is not taken for the call's time."""
    work, made = _timed_calls(clock, [0.03, 0.0125, 0.015])
    calls, once = measure_module.calibrate(work, 0.05)
    assert made == [0.03, 0.0125, 0.015]
    assert (calls, once) == (4, pytest.approx(0.0125))


def test_two_calls_of_several_samples_length_end_the_calibration(clock: FakeTime) -> None:
    """Two calls of LONG_CALL x the target make a sample of one call: a third would not change it."""
    long = measure_module.LONG_CALL * 0.05
    work, made = _timed_calls(clock, [long, long + 0.01, 0.01])
    calls, once = measure_module.calibrate(work, 0.05)
    assert made == [long, long + 0.01]
    assert (calls, once) == (1, pytest.approx(long))


def test_one_long_call_alone_does_not_end_the_calibration(clock: FakeTime) -> None:
    """An interrupted first call is not taken for the call's time: the best of three is."""
    work, made = _timed_calls(clock, [0.25, 0.0125, 0.0125])
    calls, once = measure_module.calibrate(work, 0.05)
    assert made == [0.25, 0.0125, 0.0125]
    assert (calls, once) == (4, pytest.approx(0.0125))


def test_a_call_shorter_than_that_is_timed_three_times(clock: FakeTime) -> None:
    work, made = _timed_calls(clock, [0.15, 0.04, 0.15])
    calls, _ = measure_module.calibrate(work, 0.05)
    assert len(made) == 3 and calls == 2


def test_without_a_target_calls_are_timed_until_a_second_is_spent(clock: FakeTime) -> None:
    work, made = _timed_calls(clock, [0.6, 0.6, 0.6])
    assert measure_module.calibrate(work, 0.0) == (1, pytest.approx(0.6))
    assert len(made) == 2
