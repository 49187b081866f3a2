"""Unit tests: summaries, the floor verdict and the noise-aware baseline verdict."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from perfsuite.judge import family as fam
from perfsuite.judge import stats
from perfsuite.model import BaselineVerdict, Because, FlagKind, NoiseFlag, Why
from perfsuite.report.explain import verdict_reason as reason


def test_summary_of_samples() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.median, s.min, s.max, s.mean, s.n) == (2.5, 1.0, 4.0, 2.5, 4)
    assert s.cv == pytest.approx(1.2909944 / 2.5)
    assert stats.summarize([5.0]).cv is None
    with pytest.raises(ValueError):
        stats.summarize([])


def test_floor_verdicts() -> None:
    assert stats.floor_verdict(70.0, 100.0, 0.65).verdict == "pass"
    fail = stats.floor_verdict(60.0, 100.0, 0.65, figure="memory.bandwidth_gbs")
    assert fail.verdict == "fail"
    assert fail.threshold == pytest.approx(65.0) and fail.fraction_of_peak == pytest.approx(0.6)
    missing = stats.floor_verdict(60.0, None, 0.65, figure="memory.bandwidth_gbs")
    assert missing.verdict == "no-reference" and missing.because is None


def samples(seed: int, scale: float = 1.0, cv: float = 0.02, n: int = 10) -> list[float]:
    return list(100 * scale * np.random.default_rng(seed).lognormal(0, cv, n))


def runs(seed: int, k: int = 5, cv: float = 0.02, run_sd: float = 0.01, n: int = 10) -> list:
    rng = np.random.default_rng(seed)
    return [list(100 * np.exp(rng.normal(0, run_sd)) * rng.lognormal(0, cv, n)) for _ in range(k)]


def test_comparison_gives_oriented_ratio_ci_and_p_value() -> None:
    base, cur = runs(1), samples(2, scale=0.8)
    c = stats.compare(cur, base, higher_is_better=True)
    centre = np.exp(np.mean([np.median(np.log(r)) for r in base]))
    assert c.ratio == pytest.approx(np.exp(np.median(np.log(cur))) / centre)
    assert c.ci_low < c.ratio < c.ci_high < 1
    assert c.p_value < 0.001 and c.runs == 5 and c.between_sd is not None
    # The same numbers as times: slower times are the worse direction, ratio above 1 here.
    t = stats.compare(cur, base, higher_is_better=False)
    assert t.ratio == pytest.approx(1 / c.ratio)
    assert t.p_value == pytest.approx(c.p_value)


def test_between_run_spread_widens_the_test() -> None:
    """The same shift is significant against a steady baseline, not against a drifting one."""
    cur = samples(3, scale=0.9)
    steady = stats.compare(cur, runs(4, run_sd=0.002), higher_is_better=True)
    drifting = stats.compare(cur, runs(4, run_sd=0.08), higher_is_better=True)
    assert steady.p_value < 1e-4 < drifting.p_value
    assert drifting.se > steady.se


def test_one_run_baseline_is_judged_with_a_cautious_spread() -> None:
    c = stats.compare(samples(5), [samples(6)], higher_is_better=True)
    assert c.runs == 1 and c.between_sd == stats.CAUTIOUS_BETWEEN_SD
    assert c.between_source == "cautious"
    v = fam.baseline_verdict(samples(5), [samples(6)], higher_is_better=True, tolerance=0.05)
    assert "cautious run-to-run spread (sd 25%) until the baseline has 3" in reason(v)
    raw = stats.levels([samples(6)], higher_is_better=True, cautious=False)
    assert raw.between_var is None and raw.between_source == "unknown"


def test_a_young_baseline_never_calls_a_run_to_run_shift_a_regression() -> None:
    """1 or 2 runs: a 20% shift (about 2 sd of a shared VM's run-to-run spread) is not red."""
    for k in (1, 2):
        base = [samples(10 + i) for i in range(k)]
        v = fam.baseline_verdict(samples(3, scale=0.8), base, higher_is_better=True, tolerance=0.05)
        assert v.verdict == "noisy" and v.between_source == "cautious", v
    # A change that no run-to-run spread explains is still called.
    v = fam.baseline_verdict(
        samples(3, scale=0.1), [samples(10)], higher_is_better=True, tolerance=0.05
    )
    assert v.verdict == "regressed"
    # From 3 runs on, the baseline's own spread is used.
    three = stats.levels([samples(10 + i) for i in range(3)], higher_is_better=True)
    assert three.between_source != "cautious"


def test_runs_close_together_count_as_one_session() -> None:
    minutes = [0.0, 10.0, 20.0, 31.0, 40.0, 95.0]
    assert stats.sessions([60 * m for m in minutes]) == 3  # opened at 0, 31 and 95 min
    assert stats.sessions([60 * m for m in minutes], window_s=0) == 6
    assert stats.sessions([3600.0 * h for h in (2, 0, 1)]) == 3
    assert stats.sessions([]) == 0


def test_a_baseline_of_runs_from_one_session_is_judged_as_a_young_one() -> None:
    base = [samples(10 + i) for i in range(5)]
    slower = samples(3, scale=0.8)
    kw = {"higher_is_better": True, "tolerance": 0.05}
    together = fam.baseline_verdict(slower, base, sessions=1, **kw)
    assert together.verdict == "noisy" and together.between_source == "cautious"
    assert together.baseline_runs == 5 and together.baseline_sessions == 1
    assert (
        "5 baseline runs from 1 session(s), judged with a cautious run-to-run spread (sd 25%) "
        "until the baseline has runs from 3 sessions" in reason(together)
    )
    apart = fam.baseline_verdict(slower, base, sessions=3, **kw)
    assert apart.verdict == "regressed" and apart.baseline_sessions == 3
    # Not cautious (a link-state subset of a baseline that has enough): its own spread.
    subset = fam.baseline_verdict(slower, base, sessions=1, cautious=False, **kw)
    assert subset.verdict == "regressed"


def test_a_shift_within_the_run_to_run_spread_is_not_a_regression() -> None:
    base = [[m, m * 1.01, m * 0.99, m, m] for m in (100.0, 88.0, 112.0, 95.0, 105.0)]
    v = fam.baseline_verdict([89.0, 90, 88, 89, 89], base, higher_is_better=True, tolerance=0.10)
    assert v.verdict == "ok" and v.why is not None and v.why.because is Because.WITHIN_SPREAD
    assert "run-to-run spread" in reason(v)


def test_prior_fitted_across_checks_moderates_few_runs() -> None:
    rng = np.random.default_rng(9)
    variances = list(0.03**2 * rng.chisquare(4, 40) / 4)
    prior = stats.fit_prior(variances, [4] * 40)
    assert prior.df > 10 and prior.var == pytest.approx(0.03**2, rel=0.3)
    assert stats.fit_prior([0.01, 0.02], [4, 4]).df == 0  # too few checks: no prior


@pytest.mark.parametrize(
    ("scale", "cv", "expected"),
    [
        (1.00, 0.02, "ok"),
        (0.80, 0.02, "regressed"),
        (1.25, 0.02, "improved"),
        (0.93, 0.30, "ok"),  # inside the baseline's own run-to-run spread
        (1.00, 0.30, "ok"),  # within tolerance; the reason says the CI is too wide
    ],
)
def test_verdicts(scale: float, cv: float, expected: str) -> None:
    v = fam.baseline_verdict(
        samples(11, scale, cv),
        runs(12, cv=cv, run_sd=0.005),
        higher_is_better=True,
        tolerance=0.05,
    )
    assert v.verdict == expected, reason(v)
    assert v.p_value is not None and v.ci_low is not None and reason(v)
    assert v.reason == ""  # deciding words nothing: report.explain does


def test_a_change_beyond_spread_that_is_not_significant_is_noisy() -> None:
    base = runs(13, cv=0.01, run_sd=0.002)
    family = fam.SequentialFamily(126)  # the check alone would call it; the family cannot
    v = fam.baseline_verdict(
        samples(14, 0.85, cv=0.1, n=5), base, higher_is_better=True, tolerance=0.05,
        family=family,
    )  # fmt: skip
    assert v.p_value is not None and v.p_value < stats.ALPHA
    assert v.verdict == "noisy" and "not significant" in reason(v)


@pytest.mark.parametrize(
    ("p_value", "significant", "expected"),
    [
        (0.30, False, "ok"),  # not even the check alone would call it: run-to-run noise
        (0.01, False, "noisy"),  # the check alone would, the family does not
        (0.0001, True, "regressed"),
    ],
)
def test_a_change_beyond_tolerance_is_noisy_only_with_evidence_the_family_cannot_confirm(
    p_value: float, significant: bool, expected: str
) -> None:
    c = stats.Comparison(
        ratio=0.85, ci_low=0.6, ci_high=1.2, p_value=p_value, n_current=5, n_baseline=25,
        runs=5, spread=0.05, between_sd=0.1, p_baseline_noise=p_value,
    )  # fmt: skip
    decision = fam.decide(c, tolerance=0.05, significant=significant)
    assert decision.verdict == expected, decision
    if expected == "ok":
        width = (1.2 - 0.6) / 0.85  # wider than 4 tolerances: it cannot rule a change out
        assert decision.why == Why(
            Because.WITHIN_NOISE, ci_width=width, noise_p=0.3, alpha=stats.ALPHA
        )
        words = reason(verdict_of(c, decision))
        assert "run-to-run noise" in words and "p=0.3" in words
    # with a family alpha of 0.5, p=0.3 is evidence the family could not confirm
    assert fam.decide(c, tolerance=0.05, significant=False, alpha=0.5).verdict == "noisy"
    # two samples are never enough to call a change noise, either
    few = dataclasses.replace(c, n_current=2, p_value=0.3, p_baseline_noise=0.3)
    assert fam.decide(few, tolerance=0.05, significant=False) == fam.Decision(
        "noisy", Why(Because.NOT_SIGNIFICANT, fewest_samples=2)
    )
    # nor a run whose own scatter, not the baseline's noise, makes the p-value large
    scattered = dataclasses.replace(c, p_value=0.3, p_baseline_noise=0.001)
    assert fam.decide(scattered, tolerance=0.05, significant=False).verdict == "noisy"
    # nor is a p-value measured under a guard (the comparison's model does not hold)
    flags = [NoiseFlag(FlagKind.FOREIGN_LOAD, cores=1.0)]
    guarded = fam.decide(c, tolerance=0.05, significant=False, noise_flags=flags)
    assert guarded == fam.Decision("noisy", Why(Because.NOISE_FLAGS))
    assert "foreign load" in reason(verdict_of(c, guarded, noise_flags=flags))


def verdict_of(
    c: stats.Comparison, decision: fam.Decision, noise_flags: list[NoiseFlag] | None = None
) -> BaselineVerdict:
    return fam.verdict_of(
        c, decision, tolerance=0.05, baseline_median=1.0, significant=False, family_size=1,
        noise_flags=noise_flags or [],
    )  # fmt: skip


def test_no_baseline_is_new_and_guards_make_changes_noisy_both_ways() -> None:
    assert fam.baseline_verdict([1.0], None, higher_is_better=True, tolerance=0.05).verdict == "new"
    load = [NoiseFlag(FlagKind.FOREIGN_LOAD, cores=1.0)]
    for scale in (0.8, 1.25):
        v = fam.baseline_verdict(
            samples(1, scale), runs(2), higher_is_better=True, tolerance=0.05, noise_flags=load
        )
        assert v.verdict == "noisy" and "foreign load" in reason(v)


def test_few_samples_are_judged_on_what_exists_and_marked() -> None:
    v = fam.baseline_verdict([80.0, 81.0], [[100.0, 101.0]], higher_is_better=True, tolerance=0.05)
    assert v.few_samples and "only 2 samples" in reason(v)
    assert v.verdict == "noisy"  # two against two is never enough to call a regression


def test_identical_samples_do_not_break_the_test() -> None:
    c = stats.compare([5.0] * 10, [[5.0] * 10] * 3, higher_is_better=True)
    assert (c.ratio, c.ci_low, c.ci_high, c.p_value) == (1.0, 1.0, 1.0, 1.0)


def test_bad_samples_are_refused() -> None:
    for bad in ([1.0, float("nan")], [1.0, -2.0], [0.0, 1.0]):
        with pytest.raises(ValueError):
            stats.compare(bad, [[1.0, 1.0]], higher_is_better=True)


def test_detectability_knows_when_a_family_makes_a_check_blind() -> None:
    """5 against 5 in a family of 54 at this noise cannot see 5%; more samples can."""
    lv = stats.levels(runs(7, k=5, cv=0.05, run_sd=0.0, n=5), higher_is_better=True)
    assert lv.between_var is not None and lv.spread is not None
    one = stats.detectable(lv, 5, 0.05)
    family = stats.detectable(lv, 5, 0.05 / 54)
    assert one < family and family > 0.05
    needed = stats.samples_needed(lv, 0.20, 0.05 / 54, 5, 200)
    assert needed is not None and needed >= 5
    assert stats.detectable(lv, needed, 0.05 / 54) <= 0.20
    within_only = stats.levels([samples(8, cv=0.05, n=10)], higher_is_better=True, cautious=False)
    more = stats.samples_needed(within_only, 0.15, 0.05 / 54, 5, 200)
    assert more is not None and more > 5
    drifting = stats.levels(runs(7, k=5, cv=0.02, run_sd=0.2, n=5), higher_is_better=True)
    assert stats.samples_needed(drifting, 0.05, 0.05 / 54, 5, 200) is None


def test_holm_step_down() -> None:
    assert fam.holm([0.01, 0.04, 0.03, 0.005], alpha=0.05) == [True, False, False, True]
    assert fam.holm([0.001, 0.2], alpha=0.05, m=10) == [True, False]
    with pytest.raises(ValueError):
        fam.holm([0.1, 0.2], m=1)


def test_benjamini_hochberg_steps_up() -> None:
    # Holm stops at 0.03 > 0.05/2; BH's largest qualifying rank is 4 (0.04 <= 0.05).
    assert fam.benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == [True, True, True, True]
    assert fam.benjamini_hochberg([0.01, 0.2, 0.03, 0.04]) == [True, False, False, False]
    # Two of a family of ten: rank 2's threshold is 0.05 * 2 / 10 = 0.01.
    assert fam.benjamini_hochberg([0.006, 0.009], m=10) == [True, True]
    assert fam.benjamini_hochberg([0.006, 0.011], m=10) == [False, False]
    assert fam.benjamini_hochberg([]) == []
    with pytest.raises(ValueError):
        fam.benjamini_hochberg([0.1, 0.2], m=1)
    with pytest.raises(ValueError, match="unknown correction"):
        fam.correct([0.1], correction="bonferroni")
    with pytest.raises(ValueError, match="unknown correction"):
        fam.SequentialFamily(3, correction="bonferroni")


def test_a_lone_change_meets_the_same_threshold_under_either_correction() -> None:
    for m in (1, 12, 126):
        for p in (0.05 / m * 0.99, 0.05 / m * 1.01):
            assert fam.correct([p], m=m, correction="fdr") == fam.correct(
                [p], m=m, correction="holm"
            )


@pytest.mark.parametrize("correction", stats.CORRECTIONS)
def test_sequential_family_never_contradicts_the_full_procedure(correction: str) -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = list(rng.uniform(0, 0.02, 6)) + list(rng.uniform(0, 1, 6))
        rng.shuffle(p)
        family = fam.SequentialFamily(len(p), alpha=0.05, correction=correction)
        online = [family.add(x) for x in p]
        full = fam.correct(p, alpha=0.05, correction=correction)
        assert all(f for o, f in zip(online, full, strict=True) if o)
        # BH rejects everything Holm rejects.
        holm = fam.holm(p, alpha=0.05)
        assert all(b for h, b in zip(holm, fam.benjamini_hochberg(p), strict=True) if h)


def test_under_the_global_null_fdr_errs_no_more_often_than_alpha() -> None:
    """A/A: every hypothesis true; any rejection at all happens at most alpha of the time."""
    rng = np.random.default_rng(11)
    runs = 4000
    any_rejection = sum(
        any(fam.benjamini_hochberg(list(rng.uniform(0, 1, 126)))) for _ in range(runs)
    )
    assert any_rejection / runs <= stats.ALPHA + 3 * np.sqrt(stats.ALPHA / runs)


def test_finalize_decides_again_over_the_whole_family_and_keeps_noise_flags() -> None:
    """Sequential BH left the first of four equal p-values noisy; the whole family does not.

    A guarded change stays noisy whatever its p-value, and nothing that was significant is
    taken back.
    """
    from perfsuite.judge.verdict import finalize
    from perfsuite.model import FloorVerdict, Result, Work

    rng = np.random.default_rng(1)
    baseline = [list(1000 * np.exp(rng.normal(s, 0.01, 5))) for s in (0, 0.4, -0.35, 0.25, -0.2)]
    prior = stats.fit_prior([stats.run_variance(baseline, True)] * 3, [4] * 3)
    family = fam.SequentialFamily(4, alpha=0.2)
    results = []
    load = NoiseFlag(FlagKind.FOREIGN_LOAD, cores=1.0)
    for i, flags in enumerate(([], [], [load], [])):
        current = [500.0 * (1 + 0.002 * k) for k in range(5)]
        verdict = fam.baseline_verdict(
            current, baseline, higher_is_better=True, tolerance=0.3, family=family,
            noise_flags=flags, prior=prior,
        )  # fmt: skip
        r = Result(
            id=f"t[{i}]", check="rate", params={}, metric="rate", unit="1/s",
            higher_is_better=True, samples=tuple(current), seconds=(1.0,) * 5,
            summary=stats.summarize(current), work=Work(1.0, "loops"),
            floor=FloorVerdict("no-reference"), baseline=verdict,
        )  # fmt: skip
        results.append(r.with_outcome("noisy" if verdict.verdict == "noisy" else "regressed"))
    p = results[0].baseline.p_value
    assert p is not None and 0.2 / 4 < p < 0.2 * 2 / 4  # the design: first alone is not enough
    before = [r.baseline.verdict for r in results]
    assert before == ["noisy", "regressed", "noisy", "regressed"]
    final, changed = finalize(results, alpha=0.2, correction="fdr")
    assert [r.baseline.verdict for r in final] == ["regressed", "regressed", "noisy", "regressed"]
    assert changed == ["t[0]"]
    assert [r.outcome for r in final] == ["regressed", "regressed", "noisy", "regressed"]
    assert all(r.baseline.final for r in final)
    assert final[0].baseline.why is not None and final[0].baseline.why.late
    assert final[0].baseline.correction == "fdr" and final[0].baseline.family_size == 4
    assert reason(final[0].baseline).endswith(
        "; significant once the session's whole family of 4 was in (Benjamini-Hochberg), "
        "after its test had ended"
    )
    assert final[2].baseline.noise_flags == (load,)
    # Final already: nothing changes a second time.
    again, changed = finalize(final, alpha=0.2, correction="fdr")
    assert changed == [] and [r.baseline for r in again] == [r.baseline for r in final]


def test_a_blind_verdict_names_what_in_the_baseline_limits_it() -> None:
    """Scatter within the runs, the run-to-run spread, or the runs' own span: the one that binds."""
    from perfsuite.model import BaselineLimit, Limit
    from perfsuite.report.explain import limit_words

    def limit(lv: stats.Levels, tolerance: float) -> BaselineLimit:
        found = stats.baseline_limit(lv, tolerance)
        assert found.runs == lv.runs
        return found

    # the H100's power-capped GEMM: every run follows the same course, the medians agree
    course = [325.0, 332.0, 355.0, 364.0, 363.0]
    scattered = stats.levels([course] * 5, higher_is_better=True)
    assert limit(scattered, 0.05).kind is Limit.WITHIN_RUN_SCATTER
    assert limit(scattered, 0.05).value == pytest.approx(np.sqrt(scattered.within_var))
    words = limit_words(limit(scattered, 0.05))
    assert words.startswith("the scatter within their runs, sd")
    assert "--perf-sample-seconds" in words
    # tight runs whose medians move apart
    drifting = stats.levels(
        [[m * (1 + 0.001 * j) for j in range(5)] for m in (100.0, 104.0, 97.0, 103.0, 96.0)],
        higher_is_better=True,
    )
    assert limit(drifting, 0.2).kind is Limit.RUN_TO_RUN
    assert limit_words(limit(drifting, 0.2)).startswith("their run-to-run spread, sd")
    assert limit(drifting, 0.02).kind is Limit.SPREAD
    assert limit(drifting, 0.02).value == pytest.approx(0.041, abs=5e-4)
    assert limit_words(limit(drifting, 0.02)).startswith(
        "a run's median lies up to +-4.1% from their centre"
    )
    single = stats.levels([course], higher_is_better=True, cautious=False)
    assert limit_words(limit(single, 0.5)).startswith("the scatter within their runs")
    steady = stats.levels([[100.0] * 5], higher_is_better=True, cautious=False)
    assert limit(steady, 0.5) == BaselineLimit(Limit.UNKNOWN_SPREAD, None, 1)
    assert limit_words(limit(steady, 0.5)) == "their run-to-run spread, unknown with one run"
    young = stats.levels([[100.0] * 5], higher_is_better=True)
    assert limit(young, 0.05) == BaselineLimit(Limit.CAUTIOUS_SPREAD, 0.25, 1, 1)
    assert limit_words(limit(young, 0.05)) == (
        "1 baseline run(s) cannot show their run-to-run spread, taken as sd 25% until the "
        "baseline has 3"
    )


def test_a_blind_note_says_what_would_help() -> None:
    """More samples where they would do; this run's scatter; or what in the baseline binds."""
    from perfsuite.judge.verdict import Plan, undetectable
    from perfsuite.model import BaselineLimit, Limit, Undetectable
    from perfsuite.report.explain import cannot_detect_note

    blind = BaselineVerdict("ok", detectable=0.12, family_size=19, baseline_runs=5)
    blind = dataclasses.replace(blind, within_run_sd=0.06)

    def plan(
        needed: int | None, scatter: float | None = 0.02, limit: BaselineLimit | None = None
    ) -> Plan:
        return Plan(5, 5, 0.04, needed, 0.05, "option", limit, scatter)

    def note(verdict: BaselineVerdict, plan: Plan) -> str:
        return cannot_detect_note(
            dataclasses.replace(verdict, cannot_detect=undetectable(verdict, plan, 5))
        )

    assert undetectable(dataclasses.replace(blind, detectable=0.04), plan(5), 5) is None
    assert note(dataclasses.replace(blind, detectable=0.04), plan(5)) == ""
    assert undetectable(blind, plan(9), 5) == Undetectable(0.05, 5, 19, 0.12, 9, 0.06, 0.02)
    assert note(blind, plan(9)) == (
        "cannot detect a 5% change with 5 samples in a family of 19 (smallest detectable: 12%)"
        "; use --perf-samples 9"
    )
    assert "scattered more than the baseline's (sd 6.0% against 2.0%)" in note(blind, plan(5))
    assert note(blind, plan(5, scatter=0.08)).endswith(
        "5 samples left it just short: take more (--perf-samples)"
    )
    spread = BaselineLimit(Limit.RUN_TO_RUN, 0.09, 5)
    assert note(blind, plan(None, limit=spread)).endswith(
        "more samples cannot help: the baseline's 5 run(s) limit it (their run-to-run "
        "spread, sd 9.0%); accept more baseline runs (--perf-baseline-runs) or raise the "
        "tolerance"
    )
    borrowed = BaselineLimit(Limit.BORROWED_RUN_TO_RUN, 0.09, 5)
    assert "sd 9.0% (borrowed from the other checks))" in note(blind, plan(None, limit=borrowed))
    assert "limit it (their spread)" in note(blind, plan(None))
