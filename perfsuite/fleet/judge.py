"""Judging nodes against their fleet: numbers in, typed results out, no I/O, no sentences.

For each check, a node's figure is compared with the fleet's median on a log scale, oriented
so that "slow" is negative whatever the metric's direction (throughput or latency):

    z = (log x - median) / (1.4826 * MAD)        (sign flipped for lower-is-better metrics)

The MAD is floored (see :func:`scales`) so that a tight or tiny fleet, whose MAD can be zero,
does not turn a 1% difference into a huge z.  Each cell's one-sided Student-t tail
probability (the scale is itself estimated: see ``MAD_DF``) enters one family per hardware
profile (every node x check judged), corrected with Holm's step-down, so that the chance
of flagging any node of a healthy fleet stays near ``alpha`` whatever the fleet's size.
A cell is flagged only when it is also material: its figure misses the fleet median by
more than ``tolerance``.

A reading its node's own run flagged (the noise guard: foreign load, a throttled GPU) is
tainted, and the suite never calls a failure on evidence it flagged itself.  Tainted cells
are left out of each check's median, spread and degrees of freedom, so that a loaded node
cannot move its fleet, and out of the Holm family, which spans the untainted cells only; a
tainted cell is never flagged.  Nor is it a pass: one that misses the untainted fleet's
median by more than ``tolerance``, or whose check is left with too few untainted figures to
judge, asks for its node to be measured again (:attr:`Cell.RERUN`).

One run's flags are candidates.  With heavy-tailed noise a large healthy fleet always has a
node that reads 10% off by chance, which no single-run rule can tell from a slow node; a
slow node is slow again.  :func:`confirm` judges a rerun of the candidate units against the
first run's fleet (its median, spread and degrees of freedom: the candidates are too few to
be a fleet), with Holm over the candidate cells alone: a unit is confirmed when its rerun is
significantly and materially slow at a check it was flagged (or asked to rerun) at.

A second rerun (``before``: the first confirmation) judges only the cells still standing:
confirmed, or still to rerun.  A cleared cell stays cleared, and a unit the second rerun
did not measure keeps its first confirmation's verdict, so that a healthy node must draw a
tail reading twice in a row to be drained.
"""

from __future__ import annotations

import enum
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

# 1.4826 * MAD estimates the standard deviation of normal data.
MAD_TO_SD = 1.4826
# The MAD is 37% efficient for normal data: a scale estimated from n nodes is about as sure
# as a standard deviation with 0.37 (n - 1) degrees of freedom.  Normal tails with the
# estimated scale would raise false alarms a few times more often than alpha at 100 nodes
# (lab/fleet_false_alarms.py); t tails of those degrees of freedom hold it.  Small fleets
# get at least MIN_DF, so that their power does not vanish: their false alarms are held by
# the tolerance instead.
MAD_DF = 0.37
MIN_DF = 30.0


@dataclass(frozen=True)
class Rule:
    """How a fleet is judged.

    ``alpha``: the family-wise false-alarm rate over every node x check of a profile.
    ``tolerance``: the smallest shortfall from the fleet median that counts (a fraction).
    ``min_spread``: the least node-to-node spread assumed (log scale, i.e. relative): a
    floor under the MAD, which is zero when half a small fleet reads the same figure.
    """

    alpha: float = 0.01
    tolerance: float = 0.10
    min_spread: float = 0.01


class Cell(enum.IntEnum):
    """What the fleet made of one unit's reading of one check (:attr:`Judgement.state`)."""

    ABSENT = 0  # the unit did not measure the check
    UNJUDGED = 1  # its check has fewer than MIN_UNITS untainted figures
    OK = 2  # judged, and not flagged
    FLAGGED = 3  # judged slow: significant after Holm, and material
    TAINTED = 4  # flagged by its own run, left out; within the tolerance of the fleet
    RERUN = 5  # flagged by its own run, left out; it reads slow, or its check needs it


@dataclass(frozen=True)
class Judgement:
    """One profile's fleet judged: arrays over units (nodes or GPUs) x checks.

    ``ratio`` is each figure over the fleet median, oriented so that below 1 is slower
    (for a latency, the median over the figure); NaN where the unit did not measure the
    check, or the check was not judged.  ``z`` is the robust z, oriented the same way
    (negative: slow).  Both are given for tainted cells too, against the untainted fleet.
    """

    rule: Rule
    median: np.ndarray  # per check, in the metric's unit: of the untainted figures
    spread: np.ndarray  # per check: the scale used (log units), MAD-based, floored
    mad_floored: np.ndarray  # per check: whether the floor replaced 1.4826 * MAD
    count: np.ndarray  # per check: untainted units that measured it
    ratio: np.ndarray
    z: np.ndarray
    flagged: np.ndarray  # bool: significant after Holm, and material
    family: int  # cells judged (untainted, of checks with >= 3 untainted figures)
    z_threshold: float  # the least extreme z Holm rejected at; -inf when nothing was
    tainted: np.ndarray  # bool: the unit's own run flagged the reading
    rerun: np.ndarray  # bool: tainted, and slow-looking or needed to judge its check
    state: np.ndarray  # int8: each cell's Cell

    @property
    def units_flagged(self) -> np.ndarray:
        """Indices of the units with at least one flagged check."""
        return np.flatnonzero(self.flagged.any(axis=1))

    @property
    def units_rerun(self) -> np.ndarray:
        """Indices of the units to measure again: a cell to rerun, and none flagged."""
        return np.flatnonzero(self.rerun.any(axis=1) & ~self.flagged.any(axis=1))


@dataclass(frozen=True)
class SlowUnit:
    """A flagged unit: its index, its flagged checks (worst first) and its worst ratio."""

    unit: int
    checks: tuple[int, ...]
    worst_ratio: float
    worst_z: float


@dataclass(frozen=True)
class RerunUnit:
    """A unit to measure again: its cells to rerun (lowest ratio first, unjudged ones last).

    ``worst_ratio`` is NaN when none of them could be compared with its fleet.
    """

    unit: int
    checks: tuple[int, ...]
    worst_ratio: float


# A check measured by fewer units than this is not judged: two figures have no middle.
MIN_UNITS = 3


def oriented_logs(values: np.ndarray, higher_is_better: np.ndarray) -> np.ndarray:
    """log(value), negated for lower-is-better checks: larger is always better."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(values)
    oriented: np.ndarray = np.where(higher_is_better[np.newaxis, :], logs, -logs)
    return oriented


def scales(logs: np.ndarray, within: np.ndarray, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """Each check's node-to-node spread (log units), and whether a floor replaced the MAD.

    The floor is the larger of ``rule.min_spread`` and the median over units of each unit's
    own within-run spread (``within``: the relative standard error of its median, NaN where
    unknown): a fleet cannot be tighter than one node's measurement of itself.
    """
    centre = _nanmedian(logs)
    mad = MAD_TO_SD * _nanmedian(np.abs(logs - centre))
    inner = _nanmedian(np.where(np.isfinite(within), within, np.nan))
    floor = np.fmax(np.nan_to_num(inner, nan=0.0), rule.min_spread)
    floored = ~(mad >= floor)
    return np.where(floored, floor, mad), floored


def _nanmedian(a: np.ndarray) -> np.ndarray:
    """The median of each column, ignoring NaN; NaN for a column with no figure."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # "All-NaN slice": NaN is the answer
        return np.asarray(np.nanmedian(a, axis=0))


def holm_threshold(p: np.ndarray, alpha: float) -> float:
    """Holm's step-down over the finite p-values of ``p``: the largest p rejected, or -1."""
    ps = np.sort(p[np.isfinite(p)])
    m = ps.size
    if m == 0:
        return -1.0
    limits = alpha / (m - np.arange(m))
    failing = np.flatnonzero(ps > limits)
    k = failing[0] if failing.size else m  # hypotheses rejected
    return float(ps[k - 1]) if k else -1.0


def judge(
    values: np.ndarray,
    higher_is_better: np.ndarray,
    within: np.ndarray | None = None,
    rule: Rule | None = None,
    tainted: np.ndarray | None = None,
) -> Judgement:
    """Judge units x checks figures (NaN: not measured) of one profile against the fleet.

    ``tainted`` (bool, units x checks): the readings their own runs flagged.  They are left
    out of the fleet's centre, spread and Holm family, never flagged, and rerun when they
    miss the untainted median by more than the tolerance, or when their check has
    ``MIN_UNITS`` figures in all but fewer untainted ones.
    """
    rule = rule or Rule()
    values = np.asarray(values, dtype=float)
    within = np.full(values.shape, np.nan) if within is None else np.asarray(within, dtype=float)
    logs = oriented_logs(values, np.asarray(higher_is_better, dtype=bool))
    logs = np.where(np.isfinite(logs), logs, np.nan)
    measured = np.isfinite(logs)
    tainted = (
        np.zeros(values.shape, dtype=bool)
        if tainted is None
        else np.asarray(tainted, dtype=bool) & measured
    )
    clean = measured & ~tainted
    fleet_logs = np.where(clean, logs, np.nan)  # the evidence the fleet is judged by
    count = np.sum(clean, axis=0)
    judged = count >= MIN_UNITS
    centre = _nanmedian(np.where(judged, fleet_logs, np.nan))
    spread, floored = scales(fleet_logs, np.where(clean, within, np.nan), rule)
    with np.errstate(all="ignore"):
        z = (logs - centre) / spread
        ratio = np.exp(logs - centre)
    z = np.where(judged[np.newaxis, :], z, np.nan)
    # One-sided: the chance of a figure this low in a healthy fleet.  The scale is estimated
    # from the fleet itself, so z has Student-t tails of the MAD's effective degrees of
    # freedom (see ``MAD_DF``), never fewer than ``MIN_DF``.  Tainted cells get no p: they
    # are not in the family.
    df = np.maximum(MAD_DF * (count - 1), MIN_DF)
    p = special.stdtr(df[np.newaxis, :], np.where(clean, z, np.nan))
    cut = holm_threshold(p, rule.alpha)
    significant = np.isfinite(p) & (p <= cut)
    material = ratio < 1.0 - rule.tolerance
    flagged = significant & material
    z_cut = float(np.nanmax(np.where(p <= cut, z, np.nan))) if cut > 0 else -math.inf
    # Without its tainted figures, a check measured by enough units cannot be judged.
    needed = (np.sum(measured, axis=0) >= MIN_UNITS) & ~judged
    rerun = tainted & (material | needed[np.newaxis, :])
    state = np.full(values.shape, Cell.ABSENT, dtype=np.int8)
    state[measured] = Cell.UNJUDGED
    state[clean & judged[np.newaxis, :]] = Cell.OK
    state[flagged] = Cell.FLAGGED
    state[tainted] = Cell.TAINTED
    state[rerun] = Cell.RERUN
    sign = np.where(np.asarray(higher_is_better, dtype=bool), 1.0, -1.0)
    return Judgement(
        rule=rule,
        median=np.exp(centre * sign),
        spread=spread,
        mad_floored=floored,
        count=count,
        ratio=ratio,
        z=z,
        flagged=flagged,
        family=int(np.isfinite(p).sum()),
        z_threshold=z_cut,
        tainted=tainted,
        rerun=rerun,
        state=state,
    )


def first_threshold(family: int, alpha: float, units: int = 1000) -> float:
    """The z a lone slow cell must reach in a family of ``family`` cells (Bonferroni's)."""
    df = max(MAD_DF * (units - 1), MIN_DF)
    return float(special.stdtrit(df, alpha / max(family, 1)))


def slow_units(j: Judgement) -> list[SlowUnit]:
    """The flagged units, worst first (by their lowest flagged ratio)."""
    out = []
    for u in j.units_flagged:
        cols = np.flatnonzero(j.flagged[u])
        cols = cols[np.argsort(j.ratio[u, cols])]
        out.append(
            SlowUnit(
                unit=int(u),
                checks=tuple(int(c) for c in cols),
                worst_ratio=float(j.ratio[u, cols[0]]),
                worst_z=float(np.min(j.z[u, cols])),
            )
        )
    return sorted(out, key=lambda s: (s.worst_ratio, s.worst_z))


def rerun_units(j: Judgement) -> list[RerunUnit]:
    """The units to measure again (see :attr:`Judgement.units_rerun`), worst first."""
    out = []
    for u in j.units_rerun:
        cols = np.flatnonzero(j.rerun[u])
        ratios = np.where(np.isnan(j.ratio[u, cols]), np.inf, j.ratio[u, cols])
        cols = cols[np.argsort(ratios, kind="stable")]
        worst = float(j.ratio[u, cols[0]])
        out.append(RerunUnit(unit=int(u), checks=tuple(int(c) for c in cols), worst_ratio=worst))
    return sorted(out, key=lambda r: (math.isnan(r.worst_ratio), r.worst_ratio, r.unit))


def worst_first(j: Judgement) -> np.ndarray:
    """Unit indices ordered worst first: flagged, then to rerun, then by their lowest ratio."""
    with np.errstate(all="ignore"):
        lowest = np.where(np.isnan(j.ratio), np.inf, j.ratio).min(axis=1, initial=np.inf)
    flagged = j.flagged.any(axis=1)
    rerun = j.rerun.any(axis=1)
    return np.lexsort((lowest, ~rerun, ~flagged))


# Stage 2: a rerun of the flagged nodes, judged against the first run's fleet.


class Recheck(enum.IntEnum):
    """What a rerun made of one candidate cell (:attr:`Confirmation.state`).

    A candidate cell is one the first run flagged, or asked to rerun.
    """

    NONE = 0  # not a candidate cell
    MISSING = 1  # the rerun did not measure it
    UNJUDGED = 2  # the first run had too few untainted figures to judge its check
    CLEARED = 3  # judged against the first run's fleet, and not slow again
    CONFIRMED = 4  # slow again: significant after Holm over the candidate cells, and material
    TAINTED = 5  # flagged by the rerun's own run, and within the tolerance: not slow
    RERUN = 6  # flagged by the rerun's own run, and it reads slow: measure it again


class Verdict(enum.IntEnum):
    """What the rerun made of a candidate unit, from its candidate cells (best evidence first).

    CONFIRMED when any cell is; else RERUN when any is; else MISSING, else UNJUDGED when
    any is; CLEARED only when every candidate cell was measured again and is not slow.
    """

    CONFIRMED = 0  # drain it
    RERUN = 1  # measure it again
    MISSING = 2  # the rerun lacks a candidate cell: not cleared
    UNJUDGED = 3  # a candidate check the first run could not judge
    CLEARED = 4  # not confirmed: not drained


@dataclass(frozen=True)
class Confirmation:
    """The candidate units' rerun readings judged against the first run's fleet.

    Arrays are over the first run's units x checks.  ``ratio`` and ``z`` place each rerun
    reading against the first run's median and spread of its check (oriented: below 1 and
    negative are slow), NaN where there is no rerun reading or no first-run median; they are
    given for every rerun reading, but only candidate cells are judged.
    """

    candidate: np.ndarray  # bool: the first run flagged the cell, or asked to rerun it
    ratio: np.ndarray
    z: np.ndarray
    confirmed: np.ndarray  # bool: untainted, significant after Holm, and material
    family: int  # candidate cells judged (measured again, untainted, of a judged check)
    z_threshold: float  # the least extreme z Holm rejected at; -inf when nothing was
    tainted: np.ndarray  # bool: the rerun's own run flagged the reading
    state: np.ndarray  # int8: each cell's Recheck
    step: np.ndarray  # int8: the rerun (1, 2, ...) that judged each cell last; 0: no candidate
    confirmations: np.ndarray  # int8: how many reruns confirmed each cell
    reruns: int = 1  # the reruns judged so far

    @property
    def units(self) -> np.ndarray:
        """Indices of the candidate units."""
        return np.flatnonzero(self.candidate.any(axis=1))

    @property
    def verdicts(self) -> np.ndarray:
        """Each unit's :class:`Verdict`; -1 for a unit that is no candidate."""
        s = self.state
        out = np.full(s.shape[0], -1, dtype=np.int8)
        for verdict, cell in (
            (Verdict.CLEARED, None),
            (Verdict.UNJUDGED, Recheck.UNJUDGED),
            (Verdict.MISSING, Recheck.MISSING),
            (Verdict.RERUN, Recheck.RERUN),
            (Verdict.CONFIRMED, Recheck.CONFIRMED),
        ):  # weakest first: each later one overrides
            hit = self.candidate.any(axis=1) if cell is None else (s == cell).any(axis=1)
            out[hit] = verdict
        return out


@dataclass(frozen=True)
class Rechecked:
    """A candidate unit after its rerun: its verdict, and its candidate cells.

    ``checks`` are ordered confirmed first, then by the rerun's ratio (lowest first, cells
    without one last); ``worst_ratio`` is the first of them's, NaN when none has one.
    """

    unit: int
    verdict: Verdict
    checks: tuple[int, ...]
    worst_ratio: float
    step: int = 1  # the rerun (1, 2, ...) that gave the verdict
    confirmations: int = 0  # how many reruns confirmed it


# A cell still standing after a rerun: a later rerun judges it again.
STANDING = (Recheck.CONFIRMED, Recheck.RERUN, Recheck.MISSING, Recheck.UNJUDGED)


def standing(c: Confirmation) -> np.ndarray:
    """The candidate cells a later rerun judges again: confirmed, or not yet judged."""
    return c.candidate & np.isin(c.state, STANDING)


def confirm(
    first: Judgement,
    values: np.ndarray,
    higher_is_better: np.ndarray,
    tainted: np.ndarray | None = None,
    before: Confirmation | None = None,
) -> Confirmation:
    """Judge a rerun of the candidate units against the first run's fleet.

    ``values`` (and ``tainted``) are the rerun's figures over the first run's units x checks,
    NaN where a unit was not measured again.  The candidates are too few to be a fleet of
    their own: each rerun reading is placed against its check's median and spread from the
    first run, with the first run's Student-t tails, and Holm's step-down runs over the
    candidate cells alone at ``first.rule.alpha``.  A cell is confirmed when its rerun
    reading is untainted, significant and misses the first run's median by more than the
    tolerance: slow again, the same way.  A tainted rerun reading is never confirmed; it
    asks for another rerun when it misses the median by more than the tolerance.

    ``before``: the previous rerun's confirmation, for a later rerun.  Then only its
    standing cells (:func:`standing`) on units this rerun measured are judged, with Holm over
    them alone; every other cell keeps ``before``'s state, ratio and z.
    """
    if before is None:
        return _recheck(first, values, higher_is_better, tainted, first.flagged | first.rerun)
    values = np.asarray(values, dtype=float)
    remeasured = np.isfinite(values).any(axis=1)[:, np.newaxis]
    now = _recheck(first, values, higher_is_better, tainted, standing(before) & remeasured)
    judged = now.candidate
    state = np.where(judged, now.state, before.state).astype(np.int8)
    return Confirmation(
        candidate=before.candidate,
        ratio=np.where(judged, now.ratio, before.ratio),
        z=np.where(judged, now.z, before.z),
        confirmed=state == Recheck.CONFIRMED,
        family=now.family,
        z_threshold=now.z_threshold,
        tainted=np.where(judged, now.tainted, before.tainted),
        state=state,
        step=np.where(judged, before.reruns + 1, before.step).astype(np.int8),
        confirmations=(before.confirmations + (judged & now.confirmed)).astype(np.int8),
        reruns=before.reruns + 1,
    )


def _recheck(
    first: Judgement,
    values: np.ndarray,
    higher_is_better: np.ndarray,
    tainted: np.ndarray | None,
    candidate: np.ndarray,
) -> Confirmation:
    """:func:`confirm`'s judgement of ``candidate`` cells on one rerun's readings."""
    rule = first.rule
    hib = np.asarray(higher_is_better, dtype=bool)
    values = np.asarray(values, dtype=float)
    if values.shape != first.flagged.shape:
        raise ValueError(f"rerun figures of shape {values.shape}, not {first.flagged.shape}")
    logs = oriented_logs(values, hib)
    logs = np.where(np.isfinite(logs), logs, np.nan)
    measured = np.isfinite(logs)
    tainted = (
        np.zeros(values.shape, dtype=bool)
        if tainted is None
        else np.asarray(tainted, dtype=bool) & measured
    )
    centre = oriented_logs(first.median[np.newaxis, :], hib)[0]
    judged = first.count >= MIN_UNITS
    with np.errstate(all="ignore"):
        z = (logs - centre) / first.spread
        ratio = np.exp(logs - centre)
    clean = candidate & measured & ~tainted & judged[np.newaxis, :]
    df = np.maximum(MAD_DF * (first.count - 1), MIN_DF)
    p = special.stdtr(df[np.newaxis, :], np.where(clean, z, np.nan))
    cut = holm_threshold(p, rule.alpha)
    material = ratio < 1.0 - rule.tolerance
    confirmed = np.isfinite(p) & (p <= cut) & material
    z_cut = float(np.nanmax(np.where(p <= cut, z, np.nan))) if cut > 0 else -math.inf
    on_judged = candidate & measured & judged[np.newaxis, :]
    state = np.full(values.shape, Recheck.NONE, dtype=np.int8)
    state[candidate & ~measured] = Recheck.MISSING
    state[candidate & measured & ~judged[np.newaxis, :]] = Recheck.UNJUDGED
    state[clean] = Recheck.CLEARED
    state[confirmed] = Recheck.CONFIRMED
    state[on_judged & tainted] = Recheck.TAINTED
    state[on_judged & tainted & material] = Recheck.RERUN
    return Confirmation(
        candidate=candidate,
        ratio=ratio,
        z=z,
        confirmed=confirmed,
        family=int(np.isfinite(p).sum()),
        z_threshold=z_cut,
        tainted=tainted,
        state=state,
        step=candidate.astype(np.int8),
        confirmations=confirmed.astype(np.int8),
    )


def rechecked_units(c: Confirmation) -> list[Rechecked]:
    """Every candidate unit with its verdict: by verdict (confirmed first), then worst first."""
    verdicts = c.verdicts
    out = []
    for u in c.units:
        cols = np.flatnonzero(c.candidate[u])
        ratios = np.where(np.isnan(c.ratio[u, cols]), np.inf, c.ratio[u, cols])
        cols = cols[np.lexsort((ratios, ~c.confirmed[u, cols]))]
        out.append(
            Rechecked(
                unit=int(u),
                verdict=Verdict(int(verdicts[u])),
                checks=tuple(int(k) for k in cols),
                worst_ratio=float(c.ratio[u, cols[0]]),
                step=int(c.step[u, cols].max()),
                confirmations=int(c.confirmations[u, cols].max()),
            )
        )
    return sorted(out, key=lambda r: (r.verdict, math.isnan(r.worst_ratio), r.worst_ratio, r.unit))
