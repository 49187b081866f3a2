"""The code that exercises the machine; checks in ``suites/`` describe what to measure."""

from perfsuite.workloads import (  # noqa: F401 - they register their sections
    knobs,
    references,
    roofline,
)
from perfsuite.workloads.backend import Target, skip_reason, targets

__all__ = ["Target", "skip_reason", "targets"]
