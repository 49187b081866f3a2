"""A steady machine, for testing plugins, checks and conftests built on perfsuite.

Load it with ``-p perfsuite.testing`` (or append ``"perfsuite.testing"`` to
``pytester.plugins``): the noise guard then reads a machine that does nothing else, and the
machine probe reads the same speeds every time, through perfsuite's measurement seam
(:mod:`perfsuite.hookspec`).  An outcome a test asserts then depends on what the test
measures, never on what else the test runner is doing.  Its hooks run last, so a conftest
that implements the same hook (to simulate foreign load, say) wins.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from perfsuite.noise import Snapshot

# The probe's components (see perfsuite.probe), at speeds a small machine might have.
STEADY_READING = {"memory": 10.0, "cache": 40.0, "compute": 20.0}


@pytest.hookimpl(trylast=True)
def pytest_perfsuite_noise_snapshot(with_gpus: bool) -> Snapshot:
    """A machine with no other work, no steal and no GPUs to throttle."""
    return Snapshot(wall=time.monotonic(), busy=0.0, steal=0.0, own=0.0, load=(), cpu_mhz=None)


@pytest.hookimpl(trylast=True)
def pytest_perfsuite_machine_reading() -> dict[str, Any]:
    """The same probe speeds every time."""
    return {**STEADY_READING, "source": "perfsuite.testing (steady)", "seconds": 0.0}
