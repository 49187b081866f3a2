"""The code that exercises the machine; checks in ``suites/`` describe what to measure."""

from perfsuite.workloads.backend import Target, skip_reason, targets

__all__ = ["Target", "skip_reason", "targets"]
