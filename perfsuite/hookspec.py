"""perfsuite's hooks: the seams where a conftest, a plugin or a study may step in.

Implement them in a ``conftest.py`` or a plugin loaded with ``-p``, as any pytest hook.
Each ``firstresult`` hook returns None to leave the reading to perfsuite.

The first two are the measurement seam perfsuite's own tests use: a plugin test then runs
on a fixed machine reading, so a busy test runner never changes the outcome it asserts, and
no test measures real hardware it does not mean to.  The third is the supported way to
slow a check down by a known amount, for studies of a verdict's power.  The fourth sets how
long a check's warm-up and samples last: a plugin's own tests make them brief, as
pytest-benchmark's tests run with a tiny ``--benchmark-max-time``.  The fifth lets another
process measure between a check's samples (``perfsuite ab``'s sides alternate there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from perfsuite.measure.loop import Measurement, Policy, Workload
    from perfsuite.measure.noise import Snapshot


@pytest.hookspec(firstresult=True)
def pytest_perfsuite_noise_snapshot(with_gpus: bool) -> Snapshot | None:
    """Read what the machine is doing now, for the noise guard (foreign load, clocks).

    The guard takes one reading before a check's warm-up and one after its last sample, and
    flags the check when the two show other work or throttling.

    :param with_gpus: whether the reading should include the GPUs' clocks and throttling.
    :returns: a :class:`perfsuite.measure.noise.Snapshot`, or None for the real reading.
    """


@pytest.hookspec(firstresult=True)
def pytest_perfsuite_machine_reading() -> dict[str, Any] | None:
    """Measure the machine's own speed now (the framework-free probe; see :mod:`probe`).

    Taken before and after each check; a baseline comparison is made per unit of it when
    the machine moved.

    :returns: the probe's reading (``{"memory": GB/s, "cache": GB/s, "compute": GFLOP/s,
        "source": str}``), or None for the real probe.
    """


@pytest.hookspec(firstresult=True)
def pytest_perfsuite_measured(workload: Workload, measurement: Measurement) -> Measurement | None:
    """Replace a check's measurement before it is judged (e.g. a known, injected slowdown).

    :param workload: what the check measured: its parameters, unit and metric.
    :param measurement: the samples as measured.
    :returns: the measurement to judge instead, or None to judge it as measured.
    """


@pytest.hookspec(firstresult=True)
def pytest_perfsuite_policy(policy: Policy) -> Policy | None:
    """Change how a check measures: its warm-up and sample lengths, its repetitions.

    Called for each check with the session's policy (``--perf-quick``, ``--perf-sample-seconds``
    and the rest); the record keeps the session's policy and names the plugin in its
    ``measurement_seam``.

    :param policy: the :class:`perfsuite.measure.loop.Policy` the options chose.
    :returns: the policy to measure this check with, or None to keep it.
    """


@pytest.hookspec(firstresult=True)
def pytest_perfsuite_between_samples(nodeid: str) -> Callable[[int], object] | None:
    """Let another process use the machine between a check's timed samples.

    The function returned is called before each timed sample after the first, with the
    sample's number (2, 3, ...), and returns when this check may measure again; one untimed
    repetition then warms the workload before the sample.  ``perfsuite ab``'s sides take
    turns here, so the two stacks' samples of a check alternate.

    :param nodeid: the check about to measure.
    :returns: that function, or None to take the samples back to back.
    """
