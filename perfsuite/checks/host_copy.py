"""Host-device copy bandwidth: host to device and device to host, pinned and pageable.

PCIe (or NVLink-C2C) is the first ceiling an input pipeline hits: every batch crosses it.
Each sample copies one 256 MiB buffer, allocated once, in one direction; bytes are counted
once per copy and reported in decimal GB/s, as nvbandwidth and CUDA's bandwidthTest count
them.  Pinned copies are judged against the profile's PCIe bandwidth per direction times the
floor fraction; pageable copies go through a staging buffer in the driver, which depends on
the host's memory and CPU more than on the link, so they are judged against their baseline
only.  The check needs a device: on a host without one it is skipped, with the reason.
"""

from __future__ import annotations

from perfsuite import backends
from perfsuite.checks.cases import Case
from perfsuite.measure import Reference, Workload
from perfsuite.model import Work

NBYTES = 256 * 2**20
DIRECTIONS = ("h2d", "d2h")
MEMORY = ("pinned", "pageable")
# A healthy PCIe 4/5 x16 link reaches 80-90% of its per-direction figure with pinned memory;
# 0.75 of that, as for the other floors: 0.65 of the datasheet figure.
FLOOR_FRACTION = 0.65
SEED = 4096


def cases() -> list[Case]:
    """Every (GPU target, direction, host memory) of the backends that copy."""
    return [
        Case(t, "", f"{direction}-{memory}", (direction, memory))
        for t in backends.targets_for("host_copy")
        if t.device_kind == "gpu"
        for direction in DIRECTIONS
        for memory in MEMORY
    ]


def skip_reason(case: Case) -> str | None:
    """Why the copy cannot run here: no backend, or no device."""
    return backends.skip_reason(case.target, "host_copy")


def workload(case: Case) -> Workload:
    """Build the copy workload of one case."""
    direction, memory = case.spec
    backend = backends.get(case.target.backend)
    kernel = backend.host_copy(case.target.device, direction, memory == "pinned", NBYTES, SEED)
    return Workload(
        check="host_copy",
        params={
            "backend": case.target.backend,
            "device": case.target.device,
            "direction": direction,
            "memory": memory,
        },
        metric="bandwidth",
        unit="GB/s",
        work=Work(NBYTES, "B", "bytes copied, counted once"),
        run=kernel.run,
        sync=kernel.sync,
        scale=1e9,
        reference=(
            Reference("interconnect.pcie_gbs_per_direction", FLOOR_FRACTION, "gpu")
            if memory == "pinned"
            else None
        ),
        context={"backend_version": backend.version(), **kernel.describe()},
        close=kernel.close,
        source=backend.timer(case.target.device),
    )
