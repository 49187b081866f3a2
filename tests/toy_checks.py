"""Check files for the tests' pytester sessions: small, real measurements through the plugin."""

from __future__ import annotations


def copy_check(size: int, *, paired: bool = False) -> str:
    """A test file whose one check, ``test_copy``, copies ``size`` float64s with numpy.

    ``paired``: with a floor reference and its bare reference (the same copy), so that
    ``--perf-fidelity`` measures the two sample by sample.
    """
    extra = (
        """
        reference=Reference("memory.bandwidth_gbs", 0.5, "gpu"),
        bare=Bare("np.copyto, bare", lambda: np.copyto(b, a), 2 * a.nbytes, "GB/s", 1e9),"""
        if paired
        else ""
    )
    return f"""
import numpy as np
from perfsuite.measure.loop import Reference, Workload
from perfsuite.measure.workload import Bare
from perfsuite.model import Work

def test_copy(perf):
    a = np.random.default_rng(0).random({size})
    b = np.empty_like(a)
    perf.measure(Workload(
        check="copy", params={{"n": a.size}}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B", "copy"), run=lambda: np.copyto(b, a), scale=1e9,{extra}
    ))
"""
