"""Host-device copy bandwidth (PCIe or NVLink-C2C), pinned and pageable, both directions.

Pinned copies are judged against the profile's per-direction link bandwidth; pageable ones
against their baseline.  Skipped, with the reason, where no device is present.
"""

import pytest

from perfsuite.checks import host_copy
from perfsuite.checks.cases import params


@pytest.mark.perf
@pytest.mark.parametrize("case", params(host_copy.cases()))
def test_host_copy(perf, case):
    perf.require(case.target, "host_copy")
    perf.measure(lambda: host_copy.workload(case, perf.profile))
