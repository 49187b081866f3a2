"""What a check hands the measuring loop, and what the loop hands back.

A check describes a :class:`Workload`: what to run, how to synchronise its device, how much
work one repetition does, and which profile figure (:class:`Reference`) or bare reference
(:class:`Bare`) it is set against.  A :class:`Policy` says how many warm-up and measured
repetitions to take (the modes' :data:`FULL`, :data:`DEFAULT` and :data:`QUICK`).  The loop
(:func:`perfsuite.measure.loop.measure`) returns a :class:`Measurement`: the raw durations
and the metric derived from each.  Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from perfsuite.measure.sources import Source, nothing
from perfsuite.model import Work
from perfsuite.model.measured import Expectation as Expectation


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
    sync: Callable[[], None] = nothing
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
    sync: Callable[[], None] = nothing
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
    # Its work runs in processes a scheduler started outside this session's process tree
    # (srun's ranks, not mpiexec's children): the noise guard counts the CPU time they
    # report as the check's own, since it cannot see them as descendants.
    ranks_outside_tree: bool = False

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
    bare: dict[str, Any] | None = None  # the bare reference's samples (loop.py's ``_bare_entry``)
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
