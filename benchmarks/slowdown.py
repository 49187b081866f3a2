"""A pytest plugin that makes every timed repetition slower by a known fraction.

Used by ``benchmarks/verdicts.py`` to measure the verdicts' power: with
``PERFSUITE_INJECT_SLOWDOWN=0.2`` each repetition's work is followed by a busy wait that
stretches it to 1/(1-0.2) = 1.25 times its duration, so the metric falls by 20%.  Load it
with ``-p benchmarks.slowdown``; without the variable it does nothing.
Samples measured by child processes (the collective checks' ``mpiexec`` ranks) are timed
inside the ranks, where no busy wait can reach; the durations they report are stretched by
the same factor instead, so every check of the suite sees the same 20%.
``PERFSUITE_INJECT_SLOWDOWN_PARAM=triad`` slows only in-process workloads with that
parameter value.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from perfsuite import measure, sources


def pytest_configure(config: pytest.Config) -> None:
    """Wrap the workload step when a slowdown is asked for."""
    fraction = float(os.environ.get("PERFSUITE_INJECT_SLOWDOWN", "0") or 0)
    if not 0 < fraction < 1:
        return
    stretch = 1 / (1 - fraction) - 1
    only = os.environ.get("PERFSUITE_INJECT_SLOWDOWN_PARAM", "")
    original = measure.Workload.step

    def slower(self: measure.Workload, calls: int = 1) -> None:
        start = time.perf_counter()
        original(self, calls)
        if only and only not in {str(v) for v in self.params.values()}:
            return
        extra = (time.perf_counter() - start) * stretch
        end = time.perf_counter() + extra
        while time.perf_counter() < end:
            pass

    measure.Workload.step = slower  # type: ignore[method-assign]
    if only:
        return
    child = sources.ChildSource.durations

    def child_slower(
        self: sources.ChildSource,
        step: Callable[[], None],
        presync: Callable[[], None],
        warmup: int,
        rounds: int,
    ) -> list[float]:
        return [d * (1 + stretch) for d in child(self, step, presync, warmup, rounds)]

    sources.ChildSource.durations = child_slower  # type: ignore[method-assign]
