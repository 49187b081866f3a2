"""The lab's studies judge a family through the package's one judge, and run."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lab import ab_verdicts, best_of_passes
from perfsuite.model import (
    BaselineVerdict,
    FloorVerdict,
    Result,
    RunRecord,
    Summary,
    Work,
)


def _runs(rng: np.random.Generator, centre: float, n: int = 6) -> list[float]:
    return list(centre * (1 + 0.01 * rng.standard_normal(n)))


def test_the_raw_two_level_rule_finds_a_large_slowdown_and_calls_nothing_unchanged() -> None:
    rng = np.random.default_rng(1)
    unchanged = [(_runs(rng, 100.0), [_runs(rng, 100.0) for _ in range(5)], True)] * 4
    slowed = [(_runs(rng, 60.0), [_runs(rng, 100.0) for _ in range(5)], True)] * 4
    assert best_of_passes.two_level(unchanged, 0.05)["regressed"] == 0
    assert best_of_passes.two_level(slowed, 0.05)["regressed"] == 4


def _record(i: int, rng: np.random.Generator) -> RunRecord:
    results = []
    for check in ("a", "b", "c"):
        samples = tuple(_runs(rng, 100.0))
        result = Result(
            id=f"t.py::test[{check}]", check="stream", params={}, metric="m", unit="GB/s",
            higher_is_better=True, samples=samples, seconds=(1.0,) * len(samples),
            summary=Summary(100.0, 99.0, 101.0, 100.0, len(samples), None),
            work=Work(1.0, "B"), floor=FloorVerdict("no-reference"),
            baseline=BaselineVerdict("new", tolerance=0.05),
        )  # fmt: skip
        results.append(result)
    return RunRecord(f"r{i}", f"2026-12-0{1 + i % 5}T00:00:00+00:00", {}, {}, tuple(results))


def test_the_materiality_study_runs_and_counts_a_large_slowdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = np.random.default_rng(2)
    records = [_record(i, rng) for i in range(6)]
    ab_verdicts.materiality(records, (0.0, 0.5), random.Random(3), replays=4)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| |")]
    assert rows == ["| | 0% | 0.0% | 0.0% |", "| | 50% | 100.0% | 100.0% |"]
