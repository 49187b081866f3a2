"""Judging per unit of machine speed: pure functions of the machine probe's readings.

The readings come from :mod:`perfsuite.measure.probe`; nothing here measures.

A check whose samples move with the machine is judged on *machine-adjusted* samples: each
run's samples divided by that run's probe rate (the memory rate for byte-rate checks, the
cache rate for the rest).  When the probe itself
moved by more than twice the check's tolerance since the baseline runs, and the check moved
with it (or within its tolerance), the result is noisy rather than a regression or an
improvement: how closely a check follows the probe is not exact.  A check that moved beyond
its tolerance against the machine (slower while the machine ran faster) is judged as usual:
the machine cannot have caused that.  GPU checks record the probe but are not adjusted by it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.judge import stats
from perfsuite.measure.readings import (
    LINK,
    LINK_STATES,
    link_edges,
    link_effect,
    link_steady,
    own_rate,
    rate,
    source_of,
)
from perfsuite.model import FlagKind, MachineChange, MachineReading, NoiseFlag
from perfsuite.model.baseline import Baseline, BaselineEntry

# A probe move beyond this many tolerances makes a result noisy: a check that follows the
# machine half as closely as the probe, or half as much again, is then still within one
# tolerance of its adjusted value.
GUARD_TOLERANCES = 2.0


def per_speed(value: float, reading: Any, higher_is_better: bool) -> float | None:
    """``value`` per unit of the machine's speed beside it (a latency times it), or None."""
    speed = own_rate(reading)
    if speed is None:
        return None
    return value / speed if higher_is_better else value * speed


def link_groups(machines: Sequence[Any]) -> list[list[int]] | None:
    """The runs grouped by the state their link reading was in, or None without readings.

    Sorted by rate, a new group starts where the next reading is more than ``LINK_STATES``
    above the group's first.
    """
    rates = [rate(m, LINK) for m in machines]
    if not rates or any(r is None for r in rates):
        return None
    order = sorted(range(len(rates)), key=lambda i: float(rates[i] or 0.0))
    groups: list[list[int]] = []
    for i in order:
        value = float(rates[i] or 0.0)
        if groups and value <= LINK_STATES * float(rates[groups[-1][0]] or 0.0):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def run_variances(
    run_samples: Sequence[Sequence[float]], machines: Sequence[Any], higher_is_better: bool
) -> list[tuple[float, int]]:
    """A check's run-to-run variances and their degrees of freedom, for the shared prior.

    Where the runs carry link readings in more than one state, each state's runs give their
    own variance (a check compared like with like varies only within its state).
    """
    groups = link_groups(machines) or [list(range(len(run_samples)))]
    return [
        (stats.run_variance([run_samples[i] for i in g], higher_is_better), len(g) - 1)
        for g in groups
        if len(g) > 1
    ]


def link_state(current: Any, baseline: Sequence[Any]) -> tuple[list[int] | None, NoiseFlag | None]:
    """The baseline runs measured with the CPUs' link in the state it is in now.

    Returns ``(indices, flag)``.  ``indices`` is None when every run was in the same state
    as now, or when no run has a link reading (a baseline from before it was read: judged
    as before); a run without one (measured across two states) is in no state.  ``flag`` is
    a noise flag when the link changed state during the check, or when no baseline run was
    measured in the state it is in now: like can then not be compared with like.  Two
    readings are in the same state when they are within a factor of ``LINK_STATES``.
    """
    now = rate(current, LINK)
    if now is None:
        return None, None
    band = math.log(LINK_STATES)
    if not link_steady(current):
        before, after = link_edges(current)
        return None, NoiseFlag(
            FlagKind.LINK_CHANGED, link_before=float(before or 0.0), link=float(after or 0.0)
        )
    source = source_of(current)
    rates = [rate(r, LINK, source) for r in baseline]
    known = [r for r in rates if r is not None]
    if not known:
        return None, None
    same = [i for i, r in enumerate(rates) if r is not None and abs(math.log(r / now)) <= band]
    if len(same) == len(rates):
        return None, None
    if not same:
        return None, NoiseFlag(
            FlagKind.LINK_UNLIKE_BASELINE,
            link=now,
            baseline_low=min(known),
            baseline_high=max(known),
        )
    return same, None


def link_bounds(current: Any, baseline: Sequence[Any], effect: int) -> dict[str, list[int]]:
    """The baseline runs that bound the check whatever state its link was in during it.

    For a check measured across two link states, or in a state no baseline run was in,
    like cannot be compared with like; but the link only ever moves a check one way
    (``link_effect``).  ``"slower"`` lists the baseline runs measured in a state where the
    check runs no faster than in any state it saw now (for STREAM: the nearest link it saw,
    or nearer; for ranks: the farthest, or farther), the runs of the most extreme such state,
    so a check significantly slower than those runs is slower than the link can explain;
    ``"faster"`` is the mirror image.
    Empty lists where the baseline has no such run or no readings, or for ``effect`` 0.
    """
    edges = link_edges(current) if current else []
    seen = [e for e in [*edges, rate(current, LINK)] if e is not None]
    if effect == 0 or not seen:
        return {"slower": [], "faster": []}
    low, high = min(seen), max(seen)
    source = source_of(current)
    rates = [rate(r, LINK, source) for r in baseline]
    # A run in the state of both readings now (they were a little over 2x apart) bounds
    # neither way.
    near = [i for i, r in enumerate(rates) if r is not None and high / LINK_STATES <= r]
    far = [i for i, r in enumerate(rates) if r is not None and r <= low * LINK_STATES]
    near, far = [i for i in near if i not in far], [i for i in far if i not in near]
    # Of those, the runs of the one state at the far end (a baseline of two states would
    # otherwise be judged with both states' spread).
    if near:
        top = max(float(rates[i] or 0.0) for i in near)
        near = [i for i in near if float(rates[i] or 0.0) >= top / LINK_STATES]
    if far:
        bottom = min(float(rates[i] or 0.0) for i in far)
        far = [i for i in far if float(rates[i] or 0.0) <= bottom * LINK_STATES]
    # A nearer link (a higher handoff rate) slows work that shares the way to memory.
    return {"slower": near, "faster": far} if effect > 0 else {"slower": far, "faster": near}


def link_bound(
    samples: Sequence[float],
    runs: Sequence[Sequence[float]],
    current: Any,
    machines: Sequence[Any],
    *,
    effect: int,
    higher_is_better: bool,
    tolerance: float,
) -> tuple[str, list[int]] | None:
    """The baseline runs to judge a check against when its link state cannot be matched.

    ``machines`` are the runs' readings (with their link where they held one state).  Of
    the two bounds of ``link_bounds``, the one the check moved beyond by more than its
    tolerance (per unit of machine speed, as the verdict judges it): ``("slower",
    indices)`` for a check slower than every run in its slowest state, ``("faster", ...)``
    for the mirror image.  None when the check lies within the bounds (the link may explain
    it) or the baseline has no run in the bounding state.
    """
    band = math.log1p(tolerance)
    for direction, indices in link_bounds(current, machines, effect).items():
        if not indices:
            continue
        now: Sequence[float] = samples
        then: Sequence[Sequence[float]] = [runs[i] for i in indices]
        change = machine_change(current, [machines[i] for i in indices])
        if change is not None:
            now = adjust(samples, change.now, higher_is_better)
            then = adjust_runs(then, change.rates, higher_is_better)
        move = math.log(raw_ratio(now, then, higher_is_better))
        if (move < -band and direction == "slower") or (move > band and direction == "faster"):
            return direction, indices
    return None


def link_runs(
    samples: Sequence[float],
    runs: Sequence[Sequence[float]],
    current: Any,
    machines: Sequence[Any],
    *,
    params: Mapping[str, Any],
    higher_is_better: bool,
    tolerance: float,
) -> tuple[list[int] | None, NoiseFlag | None, str]:
    """The baseline runs a check that follows the CPUs' link is compared with.

    Returns ``(indices, flag, way)``: like with like (``link_state``: ``indices`` None for
    every run, ``flag`` a noise flag when like cannot be compared with like); or, where it
    cannot, the runs that bound the check (``link_bound``), with ``way`` "slower" or
    "faster" and ``flag`` saying why like was not compared with like.  ``way`` is empty
    unless the runs bound it.
    """
    same, flag = link_state(current, machines)
    if flag:
        bound = link_bound(
            samples,
            runs,
            current,
            machines,
            effect=link_effect(params),
            higher_is_better=higher_is_better,
            tolerance=tolerance,
        )
        if bound is not None:
            return bound[1], flag, bound[0]
    return same, flag, ""


@dataclass(frozen=True)
class SpeedChange:
    """How the machine moved since the baseline runs, for one component of the probe."""

    component: str
    now: float  # the rate over the check
    rates: tuple[float, ...]  # each baseline run's
    ratio: float  # now against the runs' geometric mean (above 1: faster)

    @property
    def recorded(self) -> MachineChange:
        """What the result's record keeps of it."""
        return MachineChange(self.component, self.ratio, len(self.rates))


def machine_change(current: Any, baseline: Sequence[Any]) -> SpeedChange | None:
    """How the machine moved since the baseline runs, for the check's component.

    None unless the check follows the host and the current reading and every baseline run's
    have that component's rate from the same source.
    """
    reading = MachineReading.read(current)
    component = reading.component if reading is not None else None
    if reading is None or not component or not baseline:
        return None
    source = reading.source or ""
    now = reading.rate(component, source)
    rates = [rate(r, component, source) for r in baseline]
    if now is None or any(r is None for r in rates):
        return None
    known = tuple(float(r or 0.0) for r in rates)
    return SpeedChange(component, now, known, now / statistics.geometric_mean(known))


def raw_ratio(
    samples: Sequence[float], runs: Sequence[Sequence[float]], higher_is_better: bool
) -> float:
    """The check's own move against the baseline runs, unadjusted (above 1: faster)."""
    level = statistics.geometric_mean([statistics.median(r) for r in runs])
    return stats.oriented_ratio(statistics.median(samples), level, higher_is_better)


def guard(
    change: SpeedChange | None, tolerance: float, raw: float | None = None
) -> NoiseFlag | None:
    """The noise flag of a machine that moved beyond the guard since its baseline runs.

    ``raw`` is the check's own move (above 1: faster), unadjusted.  When the check moved
    beyond its tolerance *against* the machine (slower on a faster machine, or faster on a
    slower one), the machine cannot have caused it, and no flag is raised; when it moved
    with the machine, or within its tolerance, how much of its move is the machine's cannot
    be told, and the result is noisy, unless the check moved more than twice as far as the
    machine, plus its tolerance (log scale): a machine that ran 15% slower cannot have made a
    check three times slower.
    """
    band = math.log1p(GUARD_TOLERANCES * tolerance)
    if change is None or abs(math.log(change.ratio)) <= band:
        return None
    if raw is not None and (raw - 1) * (change.ratio - 1) < 0:
        if abs(math.log(raw)) > math.log1p(tolerance):
            return None
    machine = abs(math.log(change.ratio))
    if raw is not None and abs(math.log(raw)) > 2 * machine + math.log1p(tolerance):
        return None
    return NoiseFlag(FlagKind.MACHINE_MOVED, ratio=float(change.ratio), component=change.component)


def adjust(samples: Sequence[float], speed: float, higher_is_better: bool) -> list[float]:
    """Samples expressed per unit of machine speed (a rate divided, a latency multiplied)."""
    return [s / speed if higher_is_better else s * speed for s in samples]


def adjust_runs(
    runs: Sequence[Sequence[float]], rates: Sequence[float], higher_is_better: bool
) -> list[list[float]]:
    """Each run's samples per unit of that run's machine speed."""
    return [adjust(r, v, higher_is_better) for r, v in zip(runs, rates, strict=True)]


def judged_run_samples(entry: BaselineEntry) -> list[tuple[float, ...]]:
    """A baseline entry's runs, machine-adjusted when every run carries the same probe."""
    machines = entry.machines
    change = machine_change(machines[-1], machines)
    if change is None:
        return entry.run_samples
    adjusted = adjust_runs(entry.run_samples, change.rates, entry.higher_is_better)
    return [tuple(r) for r in adjusted]


def baseline_prior(baseline: Baseline) -> stats.Prior:
    """The run-to-run variance a baseline's checks share (see :func:`stats.fit_prior`)."""
    variances, dfs = [], []
    for entry in baseline.entries.values():
        for variance, df in run_variances(
            judged_run_samples(entry), entry.machines, entry.higher_is_better
        ):
            variances.append(variance)
            dfs.append(df)
    return stats.fit_prior(variances, dfs)
