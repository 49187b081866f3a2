"""The one measuring loop every check goes through.

A check describes a :class:`~perfsuite.measure.workload.Workload` (what to run, how to
synchronise its device, how much work one repetition does, and which profile figure it is
judged against; :mod:`perfsuite.measure.workload` holds it, its policy and what comes back).
:func:`measure` does the rest the same way for every check:

* warm-up repetitions, timed but discarded;
* the device is synchronised before each clock read (before the start, untimed, and as part
  of the timed step, so queued asynchronous work is inside the interval);
* ``time.perf_counter`` (monotonic, highest resolution) brackets each repetition;
* raw durations are kept, and the metric is derived per sample;
* a check's bare reference (:class:`~perfsuite.measure.workload.Bare`: the same operation
  written directly against its framework) is warmed up and calibrated the same way, and one
  of its samples is taken right before each of the check's, so that each pair sees the same
  moment of a machine whose speed drifts; the check's fidelity is the median over the pairs
  of check over reference (with a source that takes all its samples at once, device event
  timers, the reference's samples follow the check's, unpaired, and the fidelity is best
  over best).

The repetitions themselves run through pytest-benchmark's ``pedantic`` mode where it is
enabled, so each measurement also appears in its table and ``--benchmark-json``; where it is
disabled (``--benchmark-disable``, or under pytest-xdist) the same loop runs here.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.errors import first_line
from perfsuite.measure.sources import ChildSource, ClockSource, Source, nothing

# The declarations, importable from here as they always were.
from perfsuite.measure.workload import DEFAULT as DEFAULT
from perfsuite.measure.workload import FULL as FULL
from perfsuite.measure.workload import QUICK as QUICK
from perfsuite.measure.workload import Bare as Bare
from perfsuite.measure.workload import Expectation as Expectation
from perfsuite.measure.workload import Measurement as Measurement
from perfsuite.measure.workload import Policy as Policy
from perfsuite.measure.workload import Reference as Reference
from perfsuite.measure.workload import Workload as Workload
from perfsuite.measure.workload import measured_as as measured_as
from perfsuite.model import Work as Work

# A measurement expected to take this long shows a progress bar (where a terminal shows it).
PROGRESS_SECONDS = 10.0
# Calibration stops after two calls that each last this many times a sample's target: a
# sample is then one call whatever a third would read.  One call alone is not trusted: an
# interrupted call would set a sample of one call where several were due.
LONG_CALL = 4.0
# progress(samples, expected seconds) -> a context whose value is called once per sample.
Progress = Callable[[int, float], contextlib.AbstractContextManager[Callable[[], None]]]


class BenchmarkClock:
    """The in-process clock, run through pytest-benchmark's ``pedantic`` mode.

    Each measurement then also appears in pytest-benchmark's table and ``--benchmark-json``,
    and its raw round times are kept.  When pytest-benchmark is disabled
    (``--benchmark-disable``, ``--benchmark-skip``, or under pytest-xdist) its ``pedantic``
    calls the target once, untimed, and the :class:`ClockSource` loop runs as that call, so
    results are never lost to a disabled benchmark fixture.
    """

    kind = ClockSource.kind

    def __init__(self, benchmark: Any) -> None:
        """Wrap a pytest-benchmark ``benchmark`` fixture."""
        self._benchmark = benchmark
        self.timer = "pytest-benchmark" if benchmark.enabled else "perf_counter"

    def durations(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Run the rounds through pytest-benchmark and return the raw round times."""
        if not self._benchmark.enabled:
            durations: list[float] = self._benchmark.pedantic(
                lambda: ClockSource().durations(step, presync, warmup, rounds)
            )
            return durations
        self._benchmark.pedantic(
            step, setup=presync, rounds=rounds, warmup_rounds=warmup, iterations=1
        )
        return [float(d) for d in self._benchmark.stats.stats.data]

    def describe(self) -> dict[str, Any]:
        """The clock, and whether pytest-benchmark ran the loop."""
        return {**ClockSource().describe(), "timer": self.timer}


@dataclass(frozen=True)
class WarmUp:
    """What the untimed warm-up did."""

    seconds: float
    windows: tuple[float, ...] = ()  # time per call in each settling window
    settled: bool | None = None  # None: no settling asked for


def warm_up(workload: Workload, policy: Policy) -> WarmUp:
    """Run the workload untimed for the policy's minimum, then until its rate settles.

    A framework's first calls can be slow for longer than any fixed warm-up: a TensorFlow
    XLA function on a CPU whose 128 MiB outputs land on fresh heap pages ran at 6 GB/s in
    some of its first 20 calls and at 15-20 GB/s after.  So, past ``warmup_seconds``, the
    operation runs in windows as long as one sample (each call synced; shorter where two
    such windows would not fit in the time left), until two windows in a row agree on the
    time per call within ``warmup_settle``, or ``warmup_max_seconds`` have passed in all.
    """
    start = time.perf_counter()
    while policy.warmup_seconds > 0 and time.perf_counter() - start < policy.warmup_seconds:
        workload.sync()
        workload.step()
    if policy.warmup_max_seconds <= 0:
        return WarmUp(time.perf_counter() - start)
    windows: list[float] = []
    settled = False
    # a sample long, but two windows must fit in what is left (long --perf-sample-seconds)
    room = (policy.warmup_max_seconds - (time.perf_counter() - start)) / 2
    window = max(min(policy.sample_seconds, room), 1e-3)
    while time.perf_counter() - start < policy.warmup_max_seconds:
        began, calls = time.perf_counter(), 0
        while calls == 0 or time.perf_counter() - began < window:
            workload.step()  # the call, then a sync: the window's clock reads a finished call
            calls += 1
        windows.append((time.perf_counter() - began) / calls)
        if len(windows) >= 2 and abs(math.log(windows[-1] / windows[-2])) <= policy.warmup_settle:
            settled = True
            break
    return WarmUp(time.perf_counter() - start, tuple(windows), settled)


def calibrate(workload: Workload, target_seconds: float) -> tuple[int, float]:
    """Calls per sample so that a sample lasts about ``target_seconds``; and one call's time.

    One call is timed alone (after the warm-up) with its synchronisation, best of up to 3,
    so the recorded per-call time includes launch and sync overhead; a sample of many calls
    amortises it.  Two calls of :data:`LONG_CALL` times the target or more end it: the
    sample is one call either way (a STREAM pass of three arrays of 4x a 480 MiB L3 takes
    0.2-0.5 s against ``perfsuite ab``'s 0.05 s target).
    """
    once = math.inf
    spent = 0.0
    # The best of up to 3 single calls (while they take under a second in all): one
    # interrupted call would otherwise pass for launch overhead.
    for timed in range(1, 4):
        workload.sync()
        start = time.perf_counter()
        workload.step()
        took = time.perf_counter() - start
        once, spent = min(once, max(took, 1e-9)), spent + took
        if spent >= 1.0 or (timed >= 2 and 0 < LONG_CALL * target_seconds <= once):
            break
    if target_seconds <= 0:
        return 1, once
    return max(1, min(100_000, math.ceil(target_seconds / once))), once


def measure(
    workload: Workload,
    policy: Policy,
    clock: Source | None = None,
    rounds: int | None = None,
    *,
    close: bool = True,
    progress: Progress | None = None,
    between: Callable[[int], object] | None = None,
) -> Measurement:
    """Measure a workload under a policy; the one loop every check uses.

    In-process sources warm up (untimed) for ``policy.warmup_seconds`` and then until the
    rate settles (:func:`warm_up`), then calibrate each sample to last
    ``policy.sample_seconds``: short operations are repeated back to back within a sample,
    so call and sync overhead and millisecond-scale interruptions are amortised.  The
    workload's own source (child ranks) wins over ``clock``, the in-process clock used
    otherwise.  ``rounds`` overrides the policy's repetition count (adaptive sampling);
    ``close=False`` keeps the workload's buffers for another measurement.
    ``progress`` opens a progress bar when the calibrated samples will take at least
    :data:`PROGRESS_SECONDS`; it ticks in the synchronisation before each sample's clock
    starts, never inside a sample.  ``between`` is called before each timed sample after the
    first, with the sample's number (2, 3, ...): another process may use the machine while it
    runs (``perfsuite ab``'s sides take turns there), so one untimed call warms the workload
    again before the sample (and one untimed repetition its bare reference).  A source that
    queues all its samples at once (device events) or takes them in child ranks has no moment
    between samples: it never calls it.
    """
    source: Source = workload.source or clock or ClockSource()
    rounds = rounds or policy.repetitions
    in_process = not isinstance(source, ChildSource)
    calls, once = 1, None
    replay: Callable[[], object] | None = None
    bare: _BareSamples | None = None
    try:
        warmed = WarmUp(0.0)
        if in_process:
            bare = _BareSamples.start(workload, policy)
            warmed = warm_up(workload, policy)
            calls, once = calibrate(workload, policy.sample_seconds)

        replay, launch = _captured(workload, calls) if in_process else (None, "host")
        with _bar(progress, policy.warmup + rounds, calls * (once or 0.0), bare) as tick:

            def step() -> None:
                if replay is None:
                    workload.step(calls)
                else:
                    replay()
                    workload.sync()

            turns = _Turns(workload, policy.warmup, rounds, bare, between, tick)
            durations = source.durations(step, turns.presync, policy.warmup, rounds)
            if bare is not None:
                bare.top_up(rounds)
    finally:
        replay = None  # the captured graph and its memory pool go before the buffers do
        if close and workload.close is not None:
            workload.close()
    if in_process and len(durations) != rounds:
        raise RuntimeError(f"{source.kind} returned {len(durations)} samples, expected {rounds}")
    described = source.describe()
    values = tuple(workload.value(d, calls) for d in durations)
    return Measurement(
        seconds=tuple(durations),
        values=values,
        timer=str(described.get("timer", described.get("clock", source.kind))),
        source=described,
        warmup_s=round(warmed.seconds, 4),
        warmup_windows=tuple(round(w, 9) for w in warmed.windows),
        warmup_settled=warmed.settled,
        calls=calls,
        call_seconds=once,
        launch=launch,
        bare=_bare_entry(workload.bare, bare, values, policy.warmup) if policy.references else None,
        waited_s=round(turns.waited, 4),
    )


def _bar(
    progress: Progress | None, total: int, sample_seconds: float, bare: _BareSamples | None
) -> contextlib.AbstractContextManager[Callable[[], None]]:
    """The progress bar of a measurement expected to last long enough to show one."""
    expected = total * sample_seconds
    if bare is not None:  # a reference sample before each of the check's
        expected += total * bare.calls * bare.once
    if progress is not None and expected >= PROGRESS_SECONDS:
        return progress(total, expected)
    return contextlib.nullcontext(nothing)


class _Turns:
    """What happens before each sample's clock starts (the source's pre-sample hook).

    Another process's turn (``between``, from the second sample on) and one untimed call
    that warms the workload again after it; the bare reference's sample paired with the
    check's; the device synchronised; the progress bar's tick.
    """

    def __init__(
        self,
        workload: Workload,
        warmup: int,
        rounds: int,
        bare: _BareSamples | None,
        between: Callable[[int], object] | None,
        tick: Callable[[], None],
    ) -> None:
        self.workload, self.warmup, self.rounds = workload, warmup, rounds
        self.bare, self.between, self.tick = bare, between, tick
        self.calls = 0
        self.waited = 0.0  # seconds spent in ``between``

    def presync(self) -> None:
        """Before a sample's clock starts: the bar ticks here."""
        self.calls += 1
        sample = self.calls - self.warmup  # the sample this one precedes
        if self.between is not None and 2 <= sample <= self.rounds:
            handed = time.perf_counter()
            self.between(sample)
            self.waited += time.perf_counter() - handed
            self.workload.sync()
            self.workload.step()  # one call, untimed: warm after the other's turn
            if self.bare is not None:
                self.bare.warm()
        if self.bare is not None:
            self.bare.sample()
        self.workload.sync()
        self.tick()


class _BareSamples:
    """A bare reference's samples, taken one right before each of the check's.

    A reference that raises (a thread it could not start, a framework error) is dropped with
    the reason, and the check goes on: a missing reference is "no-reference", never a failure.
    """

    def __init__(self, bare: Bare) -> None:
        self.bare = bare
        self.workload = bare.timed()
        self.warmed = WarmUp(0.0)
        self.calls = 1
        self.once = 0.0
        self.seconds: list[float] = []
        self.before_check = 0  # samples taken in the check's pre-sample hook
        self.error = ""

    @classmethod
    def start(cls, check: Workload, policy: Policy) -> _BareSamples | None:
        """Warm up and calibrate the check's reference; None where there is none to take."""
        if check.bare is None or check.bare.run is None or not policy.references:
            return None
        samples = cls(check.bare)
        if not check.higher_is_better:
            samples.error = "a bare reference is a rate; this check is a latency"
            return samples
        try:
            samples.warmed = warm_up(samples.workload, policy)
            samples.calls, samples.once = calibrate(samples.workload, policy.sample_seconds)
        except Exception as exc:  # any framework's error: the check goes on without it
            samples.fail(exc)
        return samples

    def fail(self, exc: Exception) -> None:
        self.error = f"the reference failed: {type(exc).__name__}: {first_line(exc)}"[:300]

    def _timed_step(self) -> float | None:
        """One repetition's seconds, or None where the reference failed (and is dropped)."""
        if self.error:
            return None
        try:
            self.workload.sync()
            start = time.perf_counter()
            self.workload.step(self.calls)
            return time.perf_counter() - start
        except Exception as exc:  # any framework's error: the check goes on without it
            self.fail(exc)
            return None

    def warm(self) -> None:
        """One untimed repetition (after another process had the machine)."""
        self._timed_step()

    def sample(self, hook: bool = True) -> None:
        """One sample of the reference, as long as one of the check's."""
        seconds = self._timed_step()
        if seconds is not None:
            self.seconds.append(seconds)
            self.before_check += hook

    def top_up(self, rounds: int) -> None:
        """As many samples as the check took, where its source did not take them in pairs.

        A device event timer queues all its samples after a single pre-sample hook; the
        reference's samples then follow the check's instead of interleaving with them.
        """
        while not self.error and len(self.seconds) < rounds:
            self.sample(hook=False)

    def entry(self, values: tuple[float, ...], warmup: int) -> dict[str, Any]:
        """The record's entry: the reference's samples and, where paired, the pairs' ratios.

        The sources that pair call the pre-sample hook once per warm-up round and once per
        sample, in that order (pytest-benchmark's ``--benchmark-cprofile`` calls it once
        more, after them): the samples paired with the check's are those that came after
        the warm-up rounds' and before any later one.
        """
        if self.error:
            return {"what": self.bare.what, "unavailable": self.error}
        rounds = len(values)
        paired = self.before_check >= warmup + rounds
        kept = self.seconds[warmup : warmup + rounds] if paired else self.seconds[-rounds:]
        rates = [self.workload.value(s, self.calls) for s in kept]
        entry: dict[str, Any] = {
            "what": self.bare.what,
            "value": max(rates),
            "unit": self.bare.unit,
            "samples": rates,
            "calls_per_sample": self.calls,
            "warmup_s": round(self.warmed.seconds, 4),
            "paired": paired,
        }
        if paired:
            entry["pair_ratios"] = pair_ratios(values, rates)
        return entry


def _bare_entry(
    bare: Bare | None, samples: _BareSamples | None, values: tuple[float, ...], warmup: int
) -> dict[str, Any] | None:
    """The record's entry for a check's bare reference, or None where the check has none."""
    if bare is None:
        return None
    if samples is None:
        return {"what": bare.what, "unavailable": bare.unavailable or "not measured in process"}
    return samples.entry(values, warmup)


def pair_ratios(values: Sequence[float], references: Sequence[float]) -> list[float]:
    """Each check sample over the reference sample taken with it (rates; below 1: slower)."""
    return [v / r for v, r in zip(values, references, strict=True)]


def _captured(workload: Workload, calls: int) -> tuple[Callable[[], object] | None, str]:
    """The workload's ``calls`` calls captured for replay, and how samples launch them.

    A capture that fails (an operation the device cannot record) leaves the calls launched
    from the host, and the record says why.
    """
    if workload.capture is None:
        return None, "host"
    try:
        return workload.capture(workload.run, calls), "graph"
    except Exception as exc:  # any framework error: measure as before, and say so
        return None, f"host (capture failed: {type(exc).__name__}: {exc})"[:300]
