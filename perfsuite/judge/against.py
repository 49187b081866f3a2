"""What a check's samples are compared with, and what the comparison had to allow for.

The stored baseline's runs, narrowed to those of the check's link state (or those that
bound it) and put per unit of the machine's speed where the probe moved; the timer and the
measuring mode they were taken with, and the facts the verdict rests on.  Pure functions of
the baseline entry and the check's readings, for :mod:`perfsuite.judge.verdict`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfsuite.judge import speed, stats
from perfsuite.measure import readings
from perfsuite.measure.workload import Policy, Workload, measured_as
from perfsuite.model import (
    BareReference,
    BaselineFacts,
    FlagKind,
    LinkSubset,
    LoadCancelled,
    MachineChange,
    MachineReading,
    ModeDifference,
    NoiseFlag,
    ReferenceChange,
)
from perfsuite.model.baseline import BaselineEntry, BaselineRun, bare_reference_value


@dataclass
class Against:
    """What a check's samples are compared with, and what the comparison had to allow for."""

    judged: Sequence[float]  # the check's samples, per unit of machine speed where adjusted
    runs: Sequence[Sequence[float]] | None  # the baseline runs, likewise
    compared: Sequence[Sequence[float]] | None  # those runs in the check's own unit
    every_run: Sequence[Sequence[float]] | None  # every run of the entry, as stored
    noise_flags: list[NoiseFlag]
    bound: str = ""  # unlike every baseline run: judged against the runs that bound it
    bound_because: NoiseFlag | None = None
    link: LinkSubset | None = None
    machine_change: MachineChange | None = None
    load: LoadCancelled | None = None  # judged by the ratios to the paired bare reference
    used: BaselineEntry | None = None  # the runs compared, where a load narrowed them


def against(
    workload: Workload,
    values: Sequence[float],
    entry: BaselineEntry | None,
    machine: MachineReading | None,
    tolerance: float,
    noise_flags: list[NoiseFlag],
    ratios: Sequence[float] = (),
) -> Against:
    """The baseline runs a check is compared with, and how.

    Under foreign load (now, or in the baseline runs), as :func:`load_plan` says: by the
    ratios to the bare reference paired with each sample, or against the quiet runs only.
    Then like with like in the CPUs' link state, and both sides per unit of the machine's
    speed where the probe moved.
    """
    runs = entry.run_samples if entry else None
    against = Against(values, runs, runs, runs, noise_flags)
    if entry is None:
        return against
    plan = load_plan(entry.runs, noise_flags, bool(ratios))
    if plan is not None:
        used = replace(entry, runs=tuple(entry.runs[i] for i in plan.runs))
        against.used = used
        if plan.load is not None:  # the pairs' ratios: no probe, no link state to allow for
            judged_runs = [r.pair_ratios for r in used.runs]
            kept = [f for f in noise_flags if f.kind is not FlagKind.FOREIGN_LOAD]
            against.judged, against.runs, against.compared = (
                list(ratios),
                judged_runs,
                used.run_samples,
            )
            against.noise_flags, against.load = kept, plan.load
            return against
        against.runs = against.compared = used.run_samples
        against.noise_flags = [*noise_flags, *([plan.flag] if plan.flag else [])]
        entry = used
    if machine is None:
        return against
    machines = entry.machines
    if readings.follows_link(workload.params):
        same, flag, way = speed.link_runs(
            values,
            entry.run_samples,
            machine,
            machines,
            params=workload.params,
            higher_is_better=workload.higher_is_better,
            tolerance=tolerance,
        )
        if way:  # unlike any baseline run: judged against the runs that bound it
            against.bound, against.bound_because = way, flag
        elif flag:
            against.noise_flags = [*against.noise_flags, flag]
        if same is not None:  # like with like, or the runs that bound it
            against.runs = against.compared = [entry.run_samples[i] for i in same]
            machines = [machines[i] for i in same]
            against.link = LinkSubset(len(same), len(entry.runs), way or "", flag if way else None)
    change = speed.machine_change(machine, machines)
    if change is not None:
        hib = workload.higher_is_better
        against.machine_change = change.recorded
        raw = speed.raw_ratio(values, against.runs or [], hib)
        against.judged = speed.adjust(values, change.now, hib)
        against.runs = speed.adjust_runs(against.runs or [], change.rates, hib)
        flag = speed.guard(change, tolerance, raw)
        against.noise_flags = [*against.noise_flags, flag] if flag else against.noise_flags
    return against


@dataclass(frozen=True)
class LoadPlan:
    """Which baseline runs a check under foreign load is compared with, and by what."""

    runs: tuple[int, ...]  # the baseline runs compared (their indices)
    load: LoadCancelled | None = None  # set: by the pairs' ratios, the load cancelled
    flag: NoiseFlag | None = None  # a load the compared runs carry, as a flag against it


def load_plan(
    runs: Sequence[BaselineRun], noise_flags: Sequence[NoiseFlag], has_ratios: bool
) -> LoadPlan | None:
    """How a check is compared when it, or some of its baseline runs, ran under foreign load.

    A load both sides of a pair shared (the check's sample and its bare reference's, taken
    one after the other) slows both alike and cancels in their ratio; but the ratio also
    cancels a change the reference shares (most references call the check's own library),
    so the check's own samples are preferred wherever no load touches them.

    * Loaded now, with its pairs' ratios: by the ratios, against the baseline runs that kept
      theirs; the load is no flag against the verdict (it stays in the record).  Without the
      ratios (or no paired run): None, the usual comparison, which the load's flag keeps
      from calling a change.
    * Quiet now: the samples, against the quiet baseline runs; with none quiet, by the
      ratios where both sides have them; else against the loaded runs under their load's
      flag.
    * Nothing loaded: None.
    """
    now = [f.cores or 0.0 for f in noise_flags if f.kind is FlagKind.FOREIGN_LOAD]
    loads = [r.load_cores for r in runs]
    if not now and all(load is None for load in loads):
        return None
    paired = tuple(i for i, r in enumerate(runs) if r.pair_ratios)
    by_ratio = has_ratios and bool(paired)
    if now and not by_ratio:
        return None
    quiet = tuple(i for i, load in enumerate(loads) if load is None)
    if not now and quiet:
        return LoadPlan(quiet)
    if by_ratio:
        cores = max([*now, *(float(loads[i] or 0.0) for i in paired)])
        return LoadPlan(paired, load=LoadCancelled(cores, len(paired), len(runs)))
    worst = max(float(load or 0.0) for load in loads)
    return LoadPlan(tuple(range(len(runs))), flag=NoiseFlag(FlagKind.FOREIGN_LOAD, cores=worst))


def facts(
    entry: BaselineEntry | None, against: Against, bare: BareReference | None, policy: Policy
) -> BaselineFacts:
    """What a baseline verdict rests on besides its figures, for the report to explain."""
    reference = bare_reference_value(bare)
    reference_change = None
    if entry is not None and reference is not None and entry.references:
        # The same operation measured bare beside the check, now and in the baseline runs.
        reference_change = ReferenceChange(
            reference / statistics.geometric_mean(entry.references), len(entry.references)
        )
    return BaselineFacts(
        machine_change=against.machine_change,
        link_state=against.link,
        reference_change=reference_change,
        measured_unlike_baseline=measured_unlike(policy.to_dict(), entry),
        baseline_span_s=baseline_span(entry),
        load_cancelled=against.load,
    )


def baseline_span(entry: BaselineEntry | None) -> float | None:
    """Seconds from a baseline entry's first accepted run to its last (None under two)."""
    if entry is None or len(entry.runs) < 2:
        return None
    times = stats.timestamps([run.created for run in entry.runs])
    return None if times is None else max(times) - min(times)


# One clock under two names: pytest-benchmark's loop times with perf_counter too.
SAME_CLOCK = frozenset({"perf_counter", "pytest-benchmark"})


def timer_unlike(timer: str, entry: BaselineEntry | None) -> NoiseFlag | None:
    """A flag when every baseline run timed this check another way, or None.

    The MPI allreduce times the collective in a C loop where the rank can build one, and
    mpi4py's calls where it cannot; at 8 B those differ by about a microsecond a call, so a
    baseline timed one way is no measure of a run timed the other.  Runs that recorded no
    timer, and the two names of the one clock, are alike.
    """
    if entry is None or not timer:
        return None
    timers = {str(r.policy["timer"]) for r in entry.runs if r.policy.get("timer")}
    if not timers or timer in timers or (timers | {timer}) <= SAME_CLOCK:
        return None
    return NoiseFlag(
        FlagKind.TIMER_UNLIKE_BASELINE, timer=timer, baseline_timers=tuple(sorted(timers))
    )


def measured_unlike(
    policy: Mapping[str, Any], entry: BaselineEntry | None
) -> ModeDifference | None:
    """How this run's measurement differs from every baseline run's, or None.

    Mode and warm-up: quick mode once warmed each check up for a fifth of full mode's time
    (it now takes the same warm-up, and older records keep theirs).  A check that speeds up
    as it runs (clocks, caches, a library's autotuning) can then read differently in the two
    modes with nothing changed: on an H100, the fp16 GEMM 7860x64x2560 read 206-209 TFLOP/s
    in quick runs and 250 in full runs, minutes apart, where the other shapes agreed.
    Sample length (``--perf-sample-seconds``): within a quick run on an H100 the power-capped
    GEMMs' 0.1 s samples followed the controller's course (bf16 720, 621, 627, 674, 681
    TFLOP/s), which longer samples may average out.
    """
    if entry is None:
        return None
    modes = {str(r.policy.get("mode")) for r in entry.runs if r.policy.get("mode")}
    warmups = {r.policy.get("warmup_seconds") for r in entry.runs}
    lengths = {r.policy.get("sample_target") for r in entry.runs}
    lengths = {x for x in lengths if isinstance(x, int | float)}
    mode, warmup = str(policy.get("mode", "")), policy.get("warmup_seconds")
    length = policy.get("sample_seconds")
    alike = {measured_as(m) for m in modes}
    like_mode = not modes or (measured_as(mode) in alike and warmup in warmups)
    like_length = not lengths or length in lengths
    if like_mode and like_length:
        return None
    return ModeDifference(
        mode=mode,
        warmup_seconds=float(warmup) if isinstance(warmup, int | float) else None,
        baseline_modes=tuple(sorted(modes)),
        baseline_warmup_seconds=tuple(sorted(w for w in warmups if isinstance(w, int | float))),
        sample_seconds=float(length) if isinstance(length, int | float) else None,
        baseline_sample_seconds=tuple(sorted(float(x) for x in lengths if x is not None)),
    )
