"""Memory-bandwidth floor: STREAM's copy, scale, add and triad on every backend and device.

Bytes are counted as STREAM counts them (see ``perfsuite.checks.stream``); the best
repetition is judged against the profile's peak bandwidth times the floor fraction, and the
median against this profile's stored baseline.
"""

import pytest

from perfsuite.backends import targets
from perfsuite.checks import stream
from perfsuite.checks.cases import marks


@pytest.fixture(autouse=True, scope="module")
def _stream_arrays():
    """A target's kernels share one set of arrays (``stream.workload``); it goes with the module."""
    yield
    stream.forget()


@pytest.mark.perf
@pytest.mark.parametrize(
    "kernel", [pytest.param(k, marks=marks(sweep=k != stream.QUICK_KERNEL)) for k in stream.KERNELS]
)
@pytest.mark.parametrize("target", targets(), ids=str)
def test_stream(perf, target, kernel):
    perf.require(target)
    perf.measure(lambda: stream.workload(target, kernel, perf.profile))
