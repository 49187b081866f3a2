"""Host-device copy bandwidth: host to device and device to host, pinned and pageable.

PCIe (or NVLink-C2C) is the first ceiling an input pipeline hits: every batch crosses it.
Each sample copies one 256 MiB buffer, allocated once, in one direction; bytes are counted
once per copy and reported in decimal GB/s, as nvbandwidth and CUDA's bandwidthTest count
them.  Pinned copies are judged against the link's bandwidth per direction times the floor
fraction: the profile's figure, or the slower link this GPU trained to (NVML's maximum
generation and width: an H100 in a Gen 4 host links at Gen 4).  Pageable copies go through
a staging buffer in the driver, which depends on the host's memory and CPU more than on the
link, so they are judged against their baseline only.  The check needs a device: on a host
without one it is skipped, with the reason.
"""

from __future__ import annotations

from perfsuite import backends
from perfsuite.checks.cases import Case
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure import environment
from perfsuite.measure.workload import Reference, Workload
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


# PCIe GB/s per lane and direction after line coding (8b/10b to Gen 2, 128b/130b after).
LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def link_gbs(generation: object, width: object) -> float | None:
    """The per-direction bandwidth of a PCIe link, or None where NVML did not say."""
    if isinstance(generation, int) and isinstance(width, int) and generation in LANE_GBS:
        return LANE_GBS[generation] * width
    return None


def reference(profile: HardwareProfile, gpu: dict[str, object]) -> Reference:
    """The pinned copies' floor: the profile's link, or the slower link this GPU trained to.

    An H100 in a PCIe Gen 4 host links at Gen 4; its floor is then Gen 4's, not the
    profile's Gen 5 (NVML's maximum generation and width of the link say which).
    """
    figure = "interconnect.pcie_gbs_per_direction"
    link = link_gbs(gpu.get("pcie_max_generation"), gpu.get("pcie_max_width"))
    profiled = profile.figure(figure)
    # The profile's figure is a rounded one (64 GB/s for Gen 5 x16's 63.0): only a link
    # clearly slower than it is a different link.
    if link is not None and (profiled is None or link < 0.95 * profiled):
        return Reference(figure, FLOOR_FRACTION, "gpu", measured=link)
    return Reference(figure, FLOOR_FRACTION, "gpu")


def workload(case: Case, profile: HardwareProfile) -> Workload:
    """Build the copy workload of one case."""
    direction, memory = case.spec
    backend = backends.get(case.target.backend)
    kernel = backend.host_copy(case.target.device, direction, memory == "pinned", NBYTES, SEED)
    gpu = backends.slot_facts(environment.gpus(), case.target.device_index)
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
        reference=reference(profile, gpu) if memory == "pinned" else None,
        host_memory=True,
        context={
            "backend_version": backend.version(),
            "pcie_link": {k: gpu.get(k) for k in ("pcie_max_generation", "pcie_max_width")},
            **kernel.describe(),
        },
        close=kernel.close,
        source=backend.timer(case.target.device),
        bare=backend.host_copy_reference(kernel, NBYTES),
    )
