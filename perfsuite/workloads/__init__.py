"""The code that exercises the machine; checks in ``suites/`` describe what to measure."""

from perfsuite.workloads import knobs, roofline  # noqa: F401 - they register their sections
from perfsuite.workloads.backend import Target, skip_reason, targets

__all__ = ["Target", "skip_reason", "targets"]
