"""The checks: what each one measures, how its work is counted, and what it is judged against.

Checks ask :mod:`perfsuite.backends` for devices, buffers and kernels; they never name a
framework.  The pytest tests in ``suites/`` parametrize over them.
"""

# Every module that registers a derived section of the run record, imported here so that a
# process that collects no check (pytest-xdist's controller) still assembles every section.
from perfsuite.checks import (  # noqa: F401 - they register their report sections
    allreduce,
    fidelity,
    input_pipeline,
    knobs,
    roofline,
    scaling,
)
