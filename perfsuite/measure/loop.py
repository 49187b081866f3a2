"""The one measuring loop every check goes through.

A check describes a :class:`Workload`: what to run, how to synchronise its device, how much
work one repetition does, and which profile figure it is judged against.  :func:`measure`
does the rest the same way for every check:

* warm-up repetitions, timed but discarded;
* the device is synchronised before each clock read (before the start, untimed, and as part
  of the timed step, so queued asynchronous work is inside the interval);
* ``time.perf_counter`` (monotonic, highest resolution) brackets each repetition;
* raw durations are kept, and the metric is derived per sample;
* a check's bare reference (:class:`Bare`: the same operation written directly against its
  framework) is warmed up and calibrated the same way, and one of its samples is taken right
  before each of the check's, so that each pair sees the same moment of a machine whose
  speed drifts; the check's fidelity is the median over the pairs of check over reference
  (with a source that takes all its samples at once, device event timers, the reference's
  samples follow the check's, unpaired, and the fidelity is best over best).

The repetitions themselves run through pytest-benchmark's ``pedantic`` mode where it is
enabled, so each measurement also appears in its table and ``--benchmark-json``; where it is
disabled (``--benchmark-disable``, or under pytest-xdist) the same loop runs here.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from perfsuite.errors import first_line
from perfsuite.measure.sources import ChildSource, ClockSource, Source
from perfsuite.model import Work


def _nothing() -> None:
    return None


# A measurement expected to take this long shows a progress bar (where a terminal shows it).
PROGRESS_SECONDS = 10.0
# progress(samples, expected seconds) -> a context whose value is called once per sample.
Progress = Callable[[int, float], contextlib.AbstractContextManager[Callable[[], None]]]


@dataclass(frozen=True)
class Policy:
    """How many warm-up and measured repetitions to run, and how far adaptive sampling may go.

    ``warmup_seconds``: warm-up continues (untimed) until this much time has passed, so that
    lazy initialisation, autotuning and clock ramp-up are over before the first sample.
    ``warmup_max_seconds``: past that minimum, warm-up goes on in windows as long as one
    sample (``sample_seconds``) until two windows in a row agree on the time per call within
    ``warmup_settle`` (the rate has settled), for at most this long in all; 0 keeps the
    fixed warm-up.
    ``max_repetitions`` and ``max_seconds`` cap the samples a check may add when its
    baseline says that ``repetitions`` cannot detect its tolerance.
    """

    warmup: int
    repetitions: int
    max_repetitions: int = 0
    max_seconds: float = 0.0
    warmup_seconds: float = 0.0
    sample_seconds: float = 0.0  # each sample repeats the operation to last at least this long
    mode: str = "custom"
    warmup_max_seconds: float = 0.0
    warmup_settle: float = 0.10
    # Sample each check's bare reference beside it (its fidelity).  The reference is never
    # part of a verdict, and pairing doubles a check's time: full mode takes it, quick and
    # default mode only with --perf-fidelity.
    references: bool = True
    # Read the machine probe before and after each check (:mod:`perfsuite.measure.probe`), so that a
    # comparison with stored baselines can tell a slow spell of the machine from a slower
    # stack.  A comparison measured in pairs side by side (``perfsuite ab``) needs none.
    machine_probe: bool = True

    def __post_init__(self) -> None:
        """Reject counts that cannot produce a measurement."""
        if self.warmup < 0 or self.repetitions < 1 or self.warmup_settle <= 0:
            raise ValueError(f"invalid policy: {self}")

    @property
    def limit(self) -> int:
        """The most repetitions adaptive sampling may take."""
        return max(self.repetitions, self.max_repetitions)

    def with_repetitions(self, repetitions: int) -> Policy:
        """The same policy with another repetition count (and a limit at least as large)."""
        return replace(
            self,
            repetitions=repetitions,
            max_repetitions=max(self.max_repetitions, repetitions),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready policy, recorded with results and baseline runs."""
        return asdict(self)


FULL = Policy(
    warmup=2,
    repetitions=10,
    max_repetitions=30,
    max_seconds=20.0,
    warmup_seconds=0.5,
    sample_seconds=0.2,
    mode="full",
    warmup_max_seconds=3.0,
)
# The default mode measures each check as full mode does (the same warm-up, repetitions and
# sample length, so their baselines compare), without the paired bare reference, and runs
# the sweeps' representative cases only (the ``perf_full`` mark deselects the rest).
DEFAULT = replace(FULL, mode="default", references=False)
# Quick mode takes fewer, shorter samples, after the same warm-up as the other modes: with one
# case per family, a check no longer runs right after its family's other cases, which had
# warmed it up for seconds, and a short warm-up left it reading unlike the default mode's.
QUICK = Policy(
    warmup=1,
    repetitions=5,
    max_repetitions=15,
    max_seconds=3.0,
    warmup_seconds=FULL.warmup_seconds,
    sample_seconds=0.1,
    mode="quick",
    warmup_max_seconds=FULL.warmup_max_seconds,
    references=False,
)


def measured_as(mode: str) -> str:
    """The measurement a mode's samples stand for: default and full mode measure alike."""
    return FULL.mode if mode == DEFAULT.mode else mode


@dataclass(frozen=True)
class Reference:
    """The profile figure(s) a check's best sample is judged against.

    ``device_kind`` says which kind of profile the figure belongs to: a GPU profile's HBM
    bandwidth is no reference for a measurement on the host CPU.  A reference built from
    several figures (a roofline bound: compute peak and bandwidth) names them all in
    ``figures`` and combines their values with ``combine``; the name shown is ``figure``.
    A reference this session measured (the host's shared-memory copy rate, say) gives its
    value in ``measured`` and is used whatever the profile says.
    """

    figure: str
    fraction: float
    device_kind: str
    figures: tuple[str, ...] = ()
    combine: Callable[..., float] | None = None
    measured: float | None = None  # a figure measured in this session, not the profile's
    # A rule of thumb rather than a figure (POP's 0.8 for an efficiency): missing it is a
    # warning, never a failure, as a missed estimated peak is.
    advisory: bool = False

    @property
    def inputs(self) -> tuple[str, ...]:
        """The profile figures this reference needs."""
        return self.figures or (self.figure,)


@dataclass(frozen=True)
class Expectation:
    """A condition a check states about its own workload, e.g. a FLOP count cross-check."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Bare:
    """A check's bare reference: the same operation, written directly, on the same data.

    ``run`` is one call (None: there is no reference, and ``unavailable`` says why); its rate
    is ``work * calls / seconds / scale`` in ``unit``, which is the check's own unit.
    """

    what: str
    run: Callable[[], object] | None = None
    work: float = 0.0
    unit: str = ""
    scale: float = 1.0
    sync: Callable[[], None] = _nothing
    unavailable: str = ""

    def timed(self) -> Workload:
        """The reference as a workload (a rate), for the warm-up, calibration and samples."""
        if self.run is None:
            raise ValueError(f"{self.what} has no reference: {self.unavailable}")
        return Workload(
            check="bare",
            params={},
            metric="",
            unit=self.unit,
            work=Work(self.work, "", self.what),
            run=self.run,
            sync=self.sync,
            scale=self.scale,
        )


@dataclass(frozen=True)
class Workload:
    """What a check measures, and how its work is counted."""

    check: str
    params: Mapping[str, Any]
    metric: str
    unit: str
    work: Work  # the work of one call of ``run``
    run: Callable[[], object]
    sync: Callable[[], None] = _nothing
    # rate = work / seconds / scale (1e9: GB/s); latency = seconds / work / scale
    scale: float = 1.0
    higher_is_better: bool = True
    reference: Reference | None = None
    floor_note: str = ""  # why a workload without a reference has no floor, for the record
    # Without a floor, the bound a reading cannot beat (a conv's roofline): a reading above
    # an estimated one is a finding about the estimate, shown as one.
    ceiling: Reference | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    close: Callable[[], None] | None = None  # releases the workload's buffers and threads
    expectations: tuple[Expectation, ...] = ()
    source: Source | None = None  # where samples come from; the in-process clock if None
    # Records ``run`` repeated ``calls`` times once and returns what replays it (a CUDA graph),
    # so a sample of short kernels pays no per-call launch from the host; None: call ``run``.
    capture: Callable[[Callable[[], object], int], Callable[[], object]] | None = None
    bare: Bare | None = None  # timed sample by sample beside the check (fidelity)
    # The source's samples are the metric itself, a ratio of two times taken on the same
    # machine (a POP efficiency), not durations: ``value`` keeps each as it is, the floor
    # is judged on the median (one step's best is no efficiency of the run), and the
    # machine probe's speed does not adjust them (a ratio does not move with the speed).
    ratio: bool = False
    # Its work moves data through host memory (a copy to or from a device): a CPU job's
    # memory traffic reaches it, wherever it is timed
    # (see :func:`perfsuite.measure.noise.on_device`).
    host_memory: bool = False

    def value(self, seconds: float, calls: int = 1) -> float:
        """Derive the metric from one sample's duration (``calls`` operations).

        A throughput is work per second (``work * calls / seconds / scale``); a latency
        (``higher_is_better=False``) is time per unit of work (``seconds / (work * calls) /
        scale``, e.g. ``scale=1e-6`` for microseconds per operation).
        """
        if seconds <= 0:
            raise ValueError(f"non-positive duration {seconds!r}: the clock did not advance")
        if self.ratio:
            return seconds
        if not self.higher_is_better:
            return seconds / (self.work.amount * calls) / self.scale
        return self.work.amount * calls / seconds / self.scale

    def step(self, calls: int = 1) -> None:
        """One timed sample: the operation ``calls`` times back to back, then one sync."""
        for _ in range(calls):
            self.run()
        self.sync()


@dataclass(frozen=True)
class Measurement:
    """Raw durations and the metric derived from each."""

    seconds: tuple[float, ...]
    values: tuple[float, ...]
    timer: str
    source: dict[str, Any] = field(default_factory=dict)
    warmup_s: float = 0.0  # untimed warm-up before the first sample
    # Time per call in each settling window of the warm-up (empty: fixed warm-up only), and
    # whether the last two agreed within the policy's ``warmup_settle``.
    warmup_windows: tuple[float, ...] = ()
    warmup_settled: bool | None = None
    calls: int = 1  # operations per sample
    call_seconds: float | None = None  # one call, timed alone with its sync (calibration)
    launch: str = "host"  # how a sample's calls were issued: "host", or "graph" (replayed)
    bare: dict[str, Any] | None = None  # the bare reference's samples (:func:`_bare_entry`)
    # Seconds spent in ``between`` (another process's turns between samples: ``perfsuite ab``)
    waited_s: float = 0.0

    @property
    def median_call_seconds(self) -> float | None:
        """One call's share of the median sample (None without samples)."""
        if not self.seconds:
            return None
        return sorted(self.seconds)[len(self.seconds) // 2] / self.calls

    @property
    def overhead_fraction(self) -> float | None:
        """Launch and sync overhead per sample, as a fraction of the median sample.

        One call timed alone with its sync, minus a call's share of a sample, is what a
        sample pays once for launching and synchronising; divided by the sample's length it
        is the error that overhead adds.  None where no call was timed alone (child ranks).
        """
        share = self.median_call_seconds
        if self.call_seconds is None or share is None:
            return None
        return max(0.0, self.call_seconds - share) / (share * self.calls)


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
    amortises it.
    """
    once = math.inf
    spent = 0.0
    # The best of up to 3 single calls (while they take under a second in all): one
    # interrupted call would otherwise pass for launch overhead.
    for _ in range(3):
        workload.sync()
        start = time.perf_counter()
        workload.step()
        took = time.perf_counter() - start
        once, spent = min(once, max(took, 1e-9)), spent + took
        if spent >= 1.0:
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
    rate settles (:func:`warm_up`), then calibrate each
    sample to last ``policy.sample_seconds``: short operations are repeated back to back
    within a sample, so call and sync overhead and millisecond-scale interruptions are
    amortised.  The workload's own source (child ranks) wins over ``clock``, the in-process
    clock used otherwise.  ``rounds`` overrides the policy's repetition count (adaptive
    sampling); ``close=False`` keeps the workload's buffers for another measurement.
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
        total = policy.warmup + rounds
        expected = total * calls * (once or 0.0)
        if bare is not None:  # a reference sample before each of the check's
            expected += total * bare.calls * bare.once
        bar = (
            progress(total, expected)
            if progress is not None and expected >= PROGRESS_SECONDS
            else contextlib.nullcontext(_nothing)
        )
        with bar as tick:

            def step() -> None:
                if replay is None:
                    workload.step(calls)
                else:
                    replay()
                    workload.sync()

            presyncs = [0]
            waited = [0.0]

            def presync() -> None:  # before a sample's clock starts: the bar ticks here
                presyncs[0] += 1
                sample = presyncs[0] - policy.warmup  # the sample this one precedes
                if between is not None and 2 <= sample <= rounds:
                    handed = time.perf_counter()
                    between(sample)
                    waited[0] += time.perf_counter() - handed
                    workload.sync()
                    workload.step()  # one call, untimed: warm after the other's turn
                    if bare is not None:
                        bare.warm()
                if bare is not None:
                    bare.sample()
                workload.sync()
                tick()

            durations = source.durations(step, presync, policy.warmup, rounds)
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
        waited_s=round(waited[0], 4),
    )


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
