"""A pytest plugin that makes every check's timed work slower by a known fraction.

For studies of a verdict's power, and for a report with regressions to look at (the lab's
``verdicts.py``, ``scripts/screenshots.py``): with ``PERFSUITE_INJECT_SLOWDOWN=0.2`` every
sample's duration, as its source measured it, is stretched to 1/(1-0.2) = 1.25 times, so
every metric falls by exactly 20% (a rate to 0.8 of itself, a latency to 1.25 times).  Load
it with ``-p perfsuite.slowdown``; without the variable it does nothing.  It implements
perfsuite's ``pytest_perfsuite_measured`` hook (:mod:`perfsuite.hookspec`).

The stretch is applied to the measured durations, not by a busy wait after each repetition:
a busy wait only slows work that runs in the timed thread, so a tf.data pipeline (whose
producer threads fill the prefetch buffer during the wait) lost 5-15% instead of 20%, and
child ranks time themselves where no wait can reach.  Stretching the durations gives every
check, in-process or not, synchronous or pipelined, the same 20% on top of its real noise,
which is what a power figure needs.  The machine probe and the bare references are not
stretched: the machine did not change, only the checked software did.  Nor are a ratio's
samples (a POP efficiency: their ranks' phases all slow alike, so the ratio stays).
``PERFSUITE_INJECT_SLOWDOWN_PARAM=triad`` slows only workloads with that parameter value.
"""

from __future__ import annotations

import dataclasses
import os

from perfsuite.measure import loop as measure


def stretched(
    m: measure.Measurement, workload: measure.Workload, factor: float
) -> measure.Measurement:
    """``m`` with every duration multiplied by ``factor`` and the metric recomputed.

    The bare reference's samples stay as measured; the pairs' ratios follow the check's.
    """
    seconds = tuple(s * factor for s in m.seconds)
    values = tuple(workload.value(s, m.calls) for s in seconds)
    bare = m.bare
    if bare is not None and bare.get("pair_ratios"):
        bare = {**bare, "pair_ratios": measure.pair_ratios(values, bare["samples"])}
    return dataclasses.replace(m, seconds=seconds, values=values, bare=bare)


def pytest_perfsuite_measured(
    workload: measure.Workload, measurement: measure.Measurement
) -> measure.Measurement | None:
    """The measurement stretched by ``PERFSUITE_INJECT_SLOWDOWN`` (perfsuite's hook)."""
    fraction = float(os.environ.get("PERFSUITE_INJECT_SLOWDOWN", "0") or 0)
    if not 0 < fraction < 1 or workload.ratio:
        return None
    only = os.environ.get("PERFSUITE_INJECT_SLOWDOWN_PARAM", "")
    if only and only not in {str(v) for v in workload.params.values()}:
        return None
    return stretched(measurement, workload, 1 / (1 - fraction))
