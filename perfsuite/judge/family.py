"""The family: a run's comparisons corrected together, and each one's verdict.

A comparison (:func:`perfsuite.judge.stats.compare`) says how far a check moved and how
sure that is; here a family's p-values are corrected together (Benjamini-Hochberg or Holm,
also as they arrive one by one during a session) and each comparison becomes a verdict
with why (:func:`decide`).  :func:`decide_family` is the one judgement of a family that the
session, ``perfsuite compare`` and the lab's studies share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.judge.stats import (
    ALPHA,
    CORRECTIONS,
    DEFAULT_CORRECTION,
    DISPERSION_WIDTH,
    Comparison,
    Prior,
    compare,
    detectable,
    fit_prior,
    levels,
    run_variance,
)
from perfsuite.model import BaselineVerdict, Because, NoiseFlag, Why

NO_PRIOR = Prior()  # no run-to-run variance shared across checks


def holm(p_values: Sequence[float], alpha: float = ALPHA, m: int | None = None) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected, family-wise error <= alpha.

    ``m`` is the size of the family; it may exceed ``len(p_values)`` when only some
    p-values are known yet.  A rejection decided on such a prefix of the family stays a
    rejection whatever the remaining p-values turn out to be, which is what lets a test
    fail as soon as its own comparison is made.
    """
    m = _family_size(p_values, m)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def benjamini_hochberg(
    p_values: Sequence[float], alpha: float = ALPHA, m: int | None = None
) -> list[bool]:
    """Benjamini-Hochberg's step-up: false discovery rate <= alpha.

    The largest rank ``k`` with ``p_(k) <= alpha k / m`` rejects the ``k`` smallest
    p-values.  When nothing changed (an A/A rerun: every hypothesis true) the chance of any
    rejection is at most ``alpha``, as under Holm; when many checks really changed (a stack
    upgrade slows a whole backend) the threshold rises with the number of them.  As with
    :func:`holm`, ``m`` may exceed the p-values known so far, and a rejection decided on that
    prefix stays one when the rest arrive: more p-values can only lower each order statistic,
    so the largest qualifying rank never falls.
    """
    from scipy import stats as sps

    m = _family_size(p_values, m)
    if not p_values:
        return []
    # The p-values still to come are counted as 1: they can only add rejections.
    padded = [*p_values, *([1.0] * (m - len(p_values)))]
    adjusted = sps.false_discovery_control(padded, method="bh")
    return [bool(a <= alpha) for a in adjusted[: len(p_values)]]


def _family_size(p_values: Sequence[float], m: int | None) -> int:
    m = len(p_values) if m is None else m
    if m < len(p_values):
        raise ValueError("the family cannot be smaller than the p-values in it")
    return m


def correct(
    p_values: Sequence[float],
    alpha: float = ALPHA,
    m: int | None = None,
    correction: str = DEFAULT_CORRECTION,
) -> list[bool]:
    """Which p-values of a family are significant under ``correction`` (``fdr`` or ``holm``)."""
    if correction == "fdr":
        return benjamini_hochberg(p_values, alpha, m)
    if correction == "holm":
        return holm(p_values, alpha, m)
    raise ValueError(f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}")


class SequentialFamily:
    """A family of known size whose p-values arrive one by one, corrected as they come."""

    def __init__(self, m: int, alpha: float = ALPHA, correction: str = DEFAULT_CORRECTION) -> None:
        """Start a family of ``m`` hypotheses."""
        if correction not in CORRECTIONS:
            raise ValueError(
                f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}"
            )
        self.m = max(1, m)
        self.alpha = alpha
        self.correction = correction
        self.p_values: list[float] = []

    @property
    def first_threshold(self) -> float:
        """The strictest threshold of the family: what a lone change must reach."""
        return self.alpha / self.m

    def add(self, p_value: float) -> bool:
        """Add a p-value; return whether it is rejected given all seen so far."""
        self.p_values.append(p_value)
        self.m = max(self.m, len(self.p_values))
        return correct(self.p_values, self.alpha, self.m, self.correction)[-1]


@dataclass(frozen=True)
class Decision:
    """A baseline verdict and why (see :func:`decide`)."""

    verdict: str
    why: Why


def decide(
    comparison: Comparison,
    *,
    tolerance: float,
    significant: bool,
    noise_flags: Sequence[NoiseFlag] = (),
    alpha: float = ALPHA,
    judged_against_bound: str = "",
) -> Decision:
    """Turn a comparison into a verdict and why.

    A change beyond the tolerance is *regressed* (or *improved*) when it is significant
    after the family's correction.  When it is not, it is *noisy* only if the check alone
    (uncorrected, at ``alpha``) would have called it: some evidence of a change that the
    family cannot confirm.  A change that not even the check alone would call (p above
    ``alpha`` with the baseline's own within- and between-run variances, the new run assumed
    as noisy as the baseline's runs) lies within the baseline's run-to-run noise, like one
    within the spread of its run medians, and is *ok*; whether the check could have seen a
    change at its tolerance is reported apart (``detectable``).  A change measured under
    ``noise_flags`` (foreign load, another link state, a machine that moved) beyond the
    tolerance and the spread stays *noisy* whatever its p-value; so does one with too few
    samples.

    ``judged_against_bound`` ("slower" or "faster") says the baseline runs compared with only
    bound the check (``speed.link_bound``): a significant change that way, beyond the
    tolerance and the spread, is a change; anything else is *noisy*, never *ok*, since the
    runs like the check's would have lain further that way.
    """
    c = comparison
    few = min(c.n_current, c.n_baseline) if c.few_samples else None
    worse, better = c.ratio < 1 - tolerance, c.ratio > 1 + tolerance
    within_spread = c.spread is not None and abs(math.log(c.ratio)) <= c.spread
    # Within the noise the baseline itself shows: judged with the baseline's variances only,
    # so a new run that is itself far noisier than the baseline's is not cleared by its own
    # scatter.  A noise flag says the comparison's model does not hold (foreign load, another
    # link state, a machine that moved): then nothing is cleared as noise either.
    p_noise = c.p_baseline_noise
    # A young baseline's noise is assumed (the cautious spread), not shown: it clears nothing.
    within_noise = (
        not (noise_flags or significant or c.few_samples)
        and p_noise is not None
        and p_noise > alpha
        and c.between_source != "cautious"
    )
    if judged_against_bound:
        changed = worse if judged_against_bound == "slower" else better
        if changed and significant and not (c.few_samples or noise_flags or within_spread):
            return Decision("regressed" if worse else "improved", Why(Because.BEYOND_TOLERANCE))
        because = (
            Because.NOT_SIGNIFICANT
            if changed and (not significant or (c.few_samples and not within_spread))
            else Because.WITHIN_SPREAD
            if changed and within_spread
            else Because.NOISE_FLAGS
            if changed
            else Because.NOT_BEYOND_BOUND
        )
        return Decision("noisy", Why(because, fewest_samples=few))
    if (worse or better) and not within_spread and not within_noise:
        if noise_flags:
            return Decision("noisy", Why(Because.NOISE_FLAGS))
        if not significant or c.few_samples:
            return Decision("noisy", Why(Because.NOT_SIGNIFICANT, fewest_samples=few))
        return Decision("regressed" if worse else "improved", Why(Because.BEYOND_TOLERANCE))
    width = (c.ci_high - c.ci_low) / c.ratio
    wide = width if width > DISPERSION_WIDTH * tolerance else None
    if (worse or better) and within_spread:
        return Decision("ok", Why(Because.WITHIN_SPREAD, ci_width=wide))
    if worse or better:
        return Decision(
            "ok", Why(Because.WITHIN_NOISE, ci_width=wide, noise_p=p_noise, alpha=alpha)
        )
    return Decision("ok", Why(Because.WITHIN_TOLERANCE, fewest_samples=few, ci_width=wide))


@dataclass(frozen=True)
class Member:
    """One comparison of a family, with what deciding it needs besides its significance."""

    comparison: Comparison
    tolerance: float
    noise_flags: Sequence[NoiseFlag] = ()
    judged_against_bound: str = ""


def decide_family(
    members: Sequence[Member],
    *,
    alpha: float = ALPHA,
    correction: str = DEFAULT_CORRECTION,
    size: int | None = None,
) -> list[tuple[Decision, bool]]:
    """The one judgement of a family of comparisons: corrected together, then each decided.

    Each member's decision and whether it is significant after ``correction`` over the
    family (of ``size`` hypotheses; default the members).  The session at its end
    (:func:`perfsuite.judge.verdict.finalize`), ``perfsuite compare`` and the lab's studies
    judge a family through here.
    """
    significant = correct([m.comparison.p_value for m in members], alpha, size, correction)
    return [
        (
            decide(
                m.comparison,
                tolerance=m.tolerance,
                significant=sig,
                noise_flags=m.noise_flags,
                alpha=alpha,
                judged_against_bound=m.judged_against_bound,
            ),
            sig,
        )
        for m, sig in zip(members, significant, strict=True)
    ]


@dataclass(frozen=True)
class SampleCheck:
    """One check of a family given by its samples alone: now, and each baseline run's."""

    now: Sequence[float]
    runs: Sequence[Sequence[float]]
    higher_is_better: bool
    tolerance: float
    noise_flags: Sequence[NoiseFlag] = ()


def judge_samples(
    checks: Sequence[SampleCheck],
    *,
    alpha: float = ALPHA,
    correction: str = DEFAULT_CORRECTION,
) -> list[tuple[Comparison, Decision, bool]]:
    """A family judged by its samples alone, through :func:`decide_family`.

    The two-level test of each check against its baseline runs, with the run-to-run prior
    fitted across the family, then the family corrected and decided at once.  No machine
    reading, load plan or link state enters: the rule a study replays on recorded samples
    (the session and ``compare`` add those before the same decision).  Each check's
    comparison, decision and significance, in order.
    """
    prior = fit_prior(
        [run_variance(c.runs, c.higher_is_better) for c in checks],
        [len(c.runs) - 1 for c in checks],
    )
    comparisons = [
        compare(c.now, c.runs, higher_is_better=c.higher_is_better, prior=prior) for c in checks
    ]
    members = [
        Member(comparison, c.tolerance, c.noise_flags)
        for comparison, c in zip(comparisons, checks, strict=True)
    ]
    decided = decide_family(members, alpha=alpha, correction=correction)
    return [(c, d, sig) for c, (d, sig) in zip(comparisons, decided, strict=True)]


def baseline_verdict(
    current: Sequence[float],
    baseline_runs: Sequence[Sequence[float]] | None,
    *,
    higher_is_better: bool,
    tolerance: float,
    baseline_run_id: str = "",
    family: SequentialFamily | None = None,
    alpha: float = ALPHA,
    noise_flags: Sequence[NoiseFlag] = (),
    prior: Prior = NO_PRIOR,
    judged_against_bound: str = "",
    bound_because: NoiseFlag | None = None,
    cautious: bool = True,
    sessions: int | None = None,
) -> BaselineVerdict:
    """Compare samples with the baseline's runs; no baseline runs means *new*.

    ``cautious``: judge a baseline of runs from fewer than :data:`MIN_RUNS` sessions with the
    cautious spread (off where the runs compared are a subset of a baseline that has enough).
    ``sessions``: how many sessions the runs come from (:func:`sessions`; default one a run).
    ``judged_against_bound``: see :func:`decide`; ``bound_because`` says why (stored).

    The verdict also says the smallest slowdown the comparison could detect at the family's
    first threshold (``detectable``).
    """
    if not baseline_runs or not any(len(r) for r in baseline_runs):
        return BaselineVerdict("new", tolerance=tolerance, why=Why(Because.NO_BASELINE))
    runs = [r for r in baseline_runs if len(r)]
    lv = levels(
        runs, higher_is_better=higher_is_better, prior=prior, cautious=cautious, sessions=sessions
    )
    c = compare(current, runs, higher_is_better=higher_is_better, lv=lv)
    threshold = family.first_threshold if family else alpha
    detect = detectable(
        lv, len(current), threshold, current=current, higher_is_better=higher_is_better
    )
    significant = family.add(c.p_value) if family else c.p_value <= alpha
    decision = decide(
        c,
        tolerance=tolerance,
        significant=significant,
        noise_flags=noise_flags,
        alpha=family.alpha if family else alpha,
        judged_against_bound=judged_against_bound,
    )
    medians = [float(np.median(r)) for r in runs]
    centre = float(np.exp(np.mean(np.log(medians))))
    return verdict_of(
        c,
        decision,
        tolerance=tolerance,
        baseline_median=centre,
        significant=significant,
        family_size=family.m if family else 1,
        correction=family.correction if family else "",
        noise_flags=noise_flags,
        baseline_run_id=baseline_run_id,
        detectable=detect,
        threshold=threshold,
        judged_against_bound=judged_against_bound,
        bound_because=bound_because,
    )


def verdict_of(
    c: Comparison,
    decision: Decision,
    *,
    tolerance: float | None,
    baseline_median: float,
    significant: bool,
    family_size: int,
    noise_flags: Sequence[NoiseFlag],
    correction: str = "",
    baseline_run_id: str = "",
    detectable: float | None = None,
    threshold: float | None = None,
    final: bool = False,
    judged_against_bound: str = "",
    bound_because: NoiseFlag | None = None,
) -> BaselineVerdict:
    """The stored verdict of a comparison, with the figures it was decided from."""
    return BaselineVerdict(
        decision.verdict,
        ratio=c.ratio,
        tolerance=tolerance,
        baseline_median=baseline_median,
        baseline_run_id=baseline_run_id,
        why=decision.why,
        ci_low=c.ci_low,
        ci_high=c.ci_high,
        p_value=c.p_value,
        significant=significant,
        n_baseline=c.n_baseline,
        few_samples=c.few_samples,
        baseline_runs=c.runs,
        baseline_sessions=c.sessions,
        between_run_sd=c.between_sd,
        within_run_sd=c.within_sd,
        run_spread=None if c.spread is None else math.exp(c.spread) - 1,
        between_source=c.between_source,
        detectable=detectable,
        family_size=family_size,
        correction=correction,
        threshold=threshold,
        noise_flags=tuple(noise_flags),
        final=final,
        judged_against_bound=judged_against_bound,
        bound_because=bound_because,
    )
