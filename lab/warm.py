"""A pytest plugin that gives quick mode's checks a longer warm-up (``-p lab.warm``).

For ``lab/quick_family_power.py``: quick mode of one case per family judged worse than the
old quick mode did on the same checks.  In the old mode a check often ran right after its
family's other cases, on the same arrays and code paths, which warmed it up for seconds;
now it runs after another family's check.  This plugin tests whether warming each check up
as the default mode does buys the verdicts back: it sets quick mode's untimed warm-up to
``PERFSUITE_LAB_WARMUP_S`` seconds at least (default 0.5, the default mode's) and lets the
settling windows go on to ``PERFSUITE_LAB_WARMUP_MAX_S`` (default 3.0).  The samples are
left as quick mode takes them.  Quick mode itself has taken this warm-up since the
experiment (``lab/measurements.md``); the plugin still sets other lengths, or replays the
experiment on an older checkout.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from perfsuite.measure.loop import Policy


@pytest.hookimpl
def pytest_perfsuite_policy(policy: Policy) -> Policy | None:
    """Quick mode's policy with the longer warm-up; other modes as they are."""
    if policy.mode != "quick":
        return None
    return replace(
        policy,
        warmup_seconds=float(os.environ.get("PERFSUITE_LAB_WARMUP_S", "0.5")),
        warmup_max_seconds=float(os.environ.get("PERFSUITE_LAB_WARMUP_MAX_S", "3.0")),
    )
