"""Unit tests: summaries and the floor and baseline verdicts."""

from __future__ import annotations

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


def test_baseline_verdicts_are_oriented() -> None:
    judge = stats.baseline_verdict
    assert judge([100.0] * 3, None, higher_is_better=True, tolerance=0.05).verdict == "new"
    assert judge([100.0] * 3, [100.0] * 3, higher_is_better=True, tolerance=0.05).verdict == "ok"
    assert (
        judge([90.0] * 3, [100.0] * 3, higher_is_better=True, tolerance=0.05).verdict == "regressed"
    )
    assert (
        judge([110.0] * 3, [100.0] * 3, higher_is_better=True, tolerance=0.05).verdict == "improved"
    )
    # For times, lower is better: 110 us against 100 us is a regression.
    slower = judge([110.0] * 3, [100.0] * 3, higher_is_better=False, tolerance=0.05)
    assert slower.verdict == "regressed" and slower.ratio == pytest.approx(100 / 110)
    assert judge([104.0] * 3, [100.0] * 3, higher_is_better=True, tolerance=0.05).verdict == "ok"
