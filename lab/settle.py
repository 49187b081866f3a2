"""A pytest plugin that keeps the host busy before the first check (``-p lab.settle``).

For ``lab/quick_family_power.py``: does a check measured early in a short run meet a less
settled host than one measured after a minute of work?  At the session's start this runs
the work a run's earlier checks would do, fp32 matrix products on every core and a
streaming copy past the caches, for ``PERFSUITE_LAB_SETTLE_S`` seconds (default 60).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Multiply and copy until the settling time is up."""
    seconds = float(os.environ.get("PERFSUITE_LAB_SETTLE_S", "60"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    big = rng.standard_normal(32 * 2**20 // 8)  # 32 Mi doubles: 256 MiB, past any L3 here
    out = np.empty_like(big)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a = (a @ a) / np.float32(1024)
        np.copyto(out, big)
