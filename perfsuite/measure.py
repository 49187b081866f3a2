"""The one measuring loop every check goes through.

A check describes a :class:`Workload`: what to run, how to synchronise its device, how much
work one repetition does, and which profile figure it is judged against.  :func:`measure`
does the rest the same way for every check:

* warm-up repetitions, timed but discarded;
* the device is synchronised before each clock read (before the start, untimed, and as part
  of the timed step, so queued asynchronous work is inside the interval);
* ``time.perf_counter`` (monotonic, highest resolution) brackets each repetition;
* raw durations are kept, and the metric is derived per sample.

The repetitions themselves run through pytest-benchmark's ``pedantic`` mode where it is
enabled, so each measurement also appears in its table and ``--benchmark-json``; where it is
disabled (``--benchmark-disable``, or under pytest-xdist) the same loop runs here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from perfsuite.model import Work


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Policy:
    """How many warm-up and measured repetitions to run."""

    warmup: int
    repetitions: int

    def __post_init__(self) -> None:
        """Reject counts that cannot produce a measurement."""
        if self.warmup < 0 or self.repetitions < 1:
            raise ValueError(f"invalid policy: {self}")


FULL = Policy(warmup=2, repetitions=10)
QUICK = Policy(warmup=1, repetitions=5)


@dataclass(frozen=True)
class Reference:
    """The profile figure(s) a check's best sample is judged against.

    ``device_kind`` says which kind of profile the figure belongs to: a GPU profile's HBM
    bandwidth is no reference for a measurement on the host CPU.  A reference built from
    several figures (a roofline bound: compute peak and bandwidth) names them all in
    ``figures`` and combines their values with ``combine``; the name shown is ``figure``.
    """

    figure: str
    fraction: float
    device_kind: str
    figures: tuple[str, ...] = ()
    combine: Callable[..., float] | None = None

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
class Workload:
    """What a check measures, and how its work is counted."""

    check: str
    params: Mapping[str, Any]
    metric: str
    unit: str
    work: Work
    run: Callable[[], object]
    sync: Callable[[], None] = _nothing
    scale: float = 1.0  # metric = work.amount / seconds / scale  (1e9 for GB/s)
    higher_is_better: bool = True
    reference: Reference | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    close: Callable[[], None] | None = None  # releases the workload's buffers and threads
    expectations: tuple[Expectation, ...] = ()

    def value(self, seconds: float) -> float:
        """Derive the metric from one repetition's duration."""
        if seconds <= 0:
            raise ValueError(f"non-positive duration {seconds!r}: the clock did not advance")
        return self.work.amount / seconds / self.scale

    def step(self) -> None:
        """One timed repetition: the work, then a device synchronisation."""
        self.run()
        self.sync()


@dataclass(frozen=True)
class Measurement:
    """Raw durations and the metric derived from each."""

    seconds: tuple[float, ...]
    values: tuple[float, ...]
    timer: str


class Runner(Protocol):
    """Runs warm-up and timed repetitions of ``step``; returns the timed durations."""

    name: str

    def __call__(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Return one duration in seconds per timed round."""
        ...


class ClockRunner:
    """The repetition loop on ``time.perf_counter``."""

    name = "perf_counter"

    def __call__(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Run ``warmup`` discarded rounds, then time ``rounds`` rounds."""
        for _ in range(warmup):
            presync()
            step()
        durations = []
        for _ in range(rounds):
            presync()
            start = time.perf_counter()
            step()
            durations.append(time.perf_counter() - start)
        return durations


class BenchmarkRunner:
    """The repetition loop of pytest-benchmark's ``pedantic`` mode, with its raw data kept.

    When pytest-benchmark is disabled (``--benchmark-disable``, or under pytest-xdist) its
    ``pedantic`` calls the target once, untimed; the :class:`ClockRunner` loop then runs as
    that one call, so results are never lost to a disabled benchmark fixture.
    """

    def __init__(self, benchmark: Any) -> None:
        """Wrap a pytest-benchmark ``benchmark`` fixture."""
        self._benchmark = benchmark
        self.name = "pytest-benchmark" if benchmark.enabled else ClockRunner.name

    def __call__(
        self, step: Callable[[], None], presync: Callable[[], None], warmup: int, rounds: int
    ) -> list[float]:
        """Run the rounds through pytest-benchmark and return the raw round times."""
        if not self._benchmark.enabled:
            durations: list[float] = self._benchmark.pedantic(
                lambda: ClockRunner()(step, presync, warmup, rounds)
            )
            return durations
        self._benchmark.pedantic(
            step, setup=presync, rounds=rounds, warmup_rounds=warmup, iterations=1
        )
        return [float(d) for d in self._benchmark.stats.stats.data]


def measure(workload: Workload, policy: Policy, runner: Runner | None = None) -> Measurement:
    """Measure a workload under a policy; the one loop every check uses."""
    runner = runner or ClockRunner()
    try:
        durations = runner(workload.step, workload.sync, policy.warmup, policy.repetitions)
    finally:
        if workload.close is not None:
            workload.close()
    if len(durations) != policy.repetitions:
        raise RuntimeError(
            f"{runner.name} returned {len(durations)} samples, expected {policy.repetitions}"
        )
    return Measurement(
        seconds=tuple(durations),
        values=tuple(workload.value(d) for d in durations),
        timer=runner.name,
    )


def repeated(
    run: Callable[[], object], sync: Callable[[], None], target_seconds: float = 0.02
) -> tuple[Callable[[], None], int]:
    """One repetition's step: ``run`` called back to back, calibrated; and how many calls."""
    calls = calls_per_repetition(run, sync, target_seconds)

    def step() -> None:
        for _ in range(calls):
            run()

    return step, calls


def calls_per_repetition(
    run: Callable[[], object], sync: Callable[[], None], target_seconds: float = 0.02
) -> int:
    """How many back-to-back calls make one repetition last about ``target_seconds``.

    Small GPU kernels finish in microseconds, far below launch and clock overheads; each
    repetition then runs the operation several times and counts that much work.  The first
    call (compilation, autotuning) is not timed.
    """
    run()
    sync()
    start = time.perf_counter()
    run()
    sync()
    once = time.perf_counter() - start
    return max(1, min(1000, math.ceil(target_seconds / max(once, 1e-9))))
