"""The checks: what each one measures, how its work is counted, and what it is judged against.

Checks ask :mod:`perfsuite.backends` for devices, buffers and kernels; they never name a
framework.  The pytest tests in ``suites/`` parametrize over them.
"""

from perfsuite.checks import (  # noqa: F401 - they register their report sections
    fidelity,
    knobs,
    roofline,
)
