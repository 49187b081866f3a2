"""A steady machine, for testing plugins, checks and conftests built on perfsuite.

Load it with ``-p perfsuite.testing`` (or ``PYTEST_PLUGINS=perfsuite.testing``): the noise
guard then reads a machine that does nothing else, and the machine probe reads the same
speeds every time, through perfsuite's measurement seam (:mod:`perfsuite.hookspec`), and
each check measures briefly: no settling warm-up, samples of a millisecond, with the
repetitions its policy asks for (a test of a plugin needs the path, not the precision).
An outcome a test asserts then depends on what the test measures, never on what else the
test runner is doing.  Its hooks run last, so a conftest that implements the same hook (to
simulate foreign load, say) wins.  :class:`FixedClock` fixes the samples themselves, for
tests of what a verdict says.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from perfsuite.measure.loop import Measurement, Policy, Workload
from perfsuite.measure.noise import Snapshot

# The probe's components (see perfsuite.measure.probe), at speeds a small machine might have.
STEADY_READING = {"memory": 10.0, "cache": 40.0, "compute": 20.0}


@pytest.hookimpl(trylast=True)
def pytest_perfsuite_noise_snapshot(with_gpus: bool) -> Snapshot:
    """A machine with no other work, no steal and no GPUs to throttle."""
    return Snapshot(wall=time.monotonic(), busy=0.0, steal=0.0, own=0.0, load=(), cpu_mhz=None)


@pytest.hookimpl(trylast=True)
def pytest_perfsuite_machine_reading() -> dict[str, Any]:
    """The same probe speeds every time."""
    return {**STEADY_READING, "source": "perfsuite.testing (steady)", "seconds": 0.0}


# How long a sample lasts on the steady machine: long enough to time, short enough that a
# test of a plugin spends its time on the plugin.
BRIEF_SAMPLE_SECONDS = 0.001


@pytest.hookimpl(trylast=True)
def pytest_perfsuite_policy(policy: Policy) -> Policy:
    """The same repetitions, measured briefly: no time-based or settling warm-up."""
    return dataclasses.replace(
        policy,
        warmup_seconds=0.0,
        warmup_max_seconds=0.0,
        sample_seconds=min(policy.sample_seconds, BRIEF_SAMPLE_SECONDS),
    )


class FixedClock:
    """A clock that says each sample took the nominal time, with a fixed, small scatter.

    For a conftest's ``pytest_perfsuite_measured``: the samples a verdict test judges are
    then the same on every machine and under any load, while the rest of the measuring path
    (warm-up, calibration, sources, the record) runs for real::

        from perfsuite.testing import FixedClock

        clock = FixedClock(lambda workload: workload.params["seconds"])

        def pytest_perfsuite_measured(workload, measurement):
            return clock(workload, measurement)
    """

    def __init__(
        self,
        nominal: Callable[[Workload], float],
        scatter: Sequence[float] = (1.0, 1.01, 0.99, 1.005, 0.995, 1.002, 0.998),
    ) -> None:
        """``nominal(workload)``: seconds one call takes; ``scatter``: factors, in turn."""
        self.nominal = nominal
        self.scatter = tuple(scatter)

    def __call__(self, workload: Workload, measurement: Measurement) -> Measurement:
        """The measurement with each sample's duration fixed, and its metric recomputed."""
        once = self.nominal(workload) * measurement.calls
        seconds = tuple(
            once * self.scatter[i % len(self.scatter)] for i in range(len(measurement.seconds))
        )
        values = tuple(workload.value(s, measurement.calls) for s in seconds)
        return dataclasses.replace(measurement, seconds=seconds, values=values, bare=None)
