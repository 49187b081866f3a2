"""Unit tests: summaries, the floor verdict and the noise-aware baseline verdict."""

from __future__ import annotations

import numpy as np
import pytest

from perfsuite import stats


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
    missing = stats.floor_verdict(60.0, None, 0.65, reason="no figure")
    assert missing.verdict == "no-reference" and missing.reason == "no figure"


def samples(seed: int, scale: float = 1.0, cv: float = 0.02, n: int = 10) -> list[float]:
    return list(100 * scale * np.random.default_rng(seed).lognormal(0, cv, n))


def test_comparison_gives_oriented_ratio_ci_and_p_value() -> None:
    base, cur = samples(1), samples(2, scale=0.8)
    c = stats.compare(cur, base, higher_is_better=True, seed=3)
    assert c.ratio == pytest.approx(np.median(cur) / np.median(base))
    assert c.ci_low < c.ratio < c.ci_high < 1
    assert c.p_value < 0.001
    # The same numbers as times: slower times are the worse direction, ratio above 1 here.
    t = stats.compare(cur, base, higher_is_better=False, seed=3)
    assert t.ratio == pytest.approx(1 / c.ratio)
    assert stats.compare(cur, base, higher_is_better=True, seed=3) == c, "seeded: reproducible"


@pytest.mark.parametrize(
    ("scale", "cv", "expected"),
    [
        (1.00, 0.02, "ok"),
        (0.80, 0.02, "regressed"),
        (1.25, 0.02, "improved"),
        (0.93, 0.30, "noisy"),  # beyond tolerance, not significant
        (1.00, 0.30, "noisy"),  # within tolerance but far too dispersed to say so
    ],
)
def test_verdicts(scale: float, cv: float, expected: str) -> None:
    v = stats.baseline_verdict(
        samples(11, scale, cv), samples(12, 1.0, cv), higher_is_better=True, tolerance=0.05
    )
    assert v.verdict == expected, v.reason
    assert v.p_value is not None and v.ci_low is not None and v.reason


def test_no_baseline_is_new_and_guards_turn_a_regression_noisy() -> None:
    assert (
        stats.baseline_verdict([1.0], None, higher_is_better=True, tolerance=0.05).verdict == "new"
    )
    v = stats.baseline_verdict(
        samples(1, 0.8),
        samples(2),
        higher_is_better=True,
        tolerance=0.05,
        guards=["under foreign load (1.00 cores of other work or steal)"],
    )
    assert v.verdict == "noisy" and "foreign load" in v.reason


def test_few_samples_are_judged_on_what_exists_and_marked() -> None:
    v = stats.baseline_verdict([80.0, 81.0], [100.0, 101.0], higher_is_better=True, tolerance=0.05)
    assert v.few_samples and "only 2 samples" in v.reason
    assert v.verdict == "noisy"  # two against two can never be significant


def test_identical_samples_do_not_break_the_bootstrap() -> None:
    c = stats.compare([5.0] * 10, [5.0] * 10, higher_is_better=True)
    assert (c.ratio, c.ci_low, c.ci_high, c.p_value) == (1.0, 1.0, 1.0, 1.0)


def test_holm_step_down() -> None:
    assert stats.holm([0.01, 0.04, 0.03, 0.005], alpha=0.05) == [True, False, False, True]
    assert stats.holm([0.001, 0.2], alpha=0.05, m=10) == [True, False]
    with pytest.raises(ValueError):
        stats.holm([0.1, 0.2], m=1)


def test_sequential_holm_never_contradicts_the_full_procedure() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = list(rng.uniform(0, 0.02, 6)) + list(rng.uniform(0, 1, 6))
        rng.shuffle(p)
        family = stats.SequentialHolm(len(p), alpha=0.05)
        online = [family.add(x) for x in p]
        full = stats.holm(p, alpha=0.05)
        assert all(f for o, f in zip(online, full, strict=True) if o)
