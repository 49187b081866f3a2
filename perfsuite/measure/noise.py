"""Noise guards: what else the machine was doing while a check measured.

A snapshot is taken before the warm-up and after the last repetition.  Between the two:

* **foreign load**: CPU time the whole host spent busy minus what this session's own
  process tree spent, plus hypervisor steal, per second of wall time (in cores).  The tree is
  the pytest process that started the session (named in ``PERFSUITE_SESSION_PID``), all its
  descendants (pytest-xdist workers, child ranks, compilers) and the children they reaped;
  a sibling xdist worker is never foreign load, an unrelated process is;
* **CPU clock and governor**, and the load average;
* **GPU clocks and throttle reasons** from NVML, before and after.

A result measured under foreign load or while a GPU was throttled carries a flag; such a
result is never reported as a regression (it is *noisy*, with the flag as the reason).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from perfsuite.measure import environment
from perfsuite.model import FlagKind, NoiseFlag

# More than a quarter of a core's worth of other work (or steal) during a measurement.
FOREIGN_LOAD_CORES = 0.25
# CPU-time accounting ticks at 10 ms: below this much foreign CPU time it is quantisation.
FOREIGN_MIN_SECONDS = 0.05

SESSION_PID_ENV = "PERFSUITE_SESSION_PID"

# A check timed on a device reaches the host's CPUs only through its host part: launching
# and synchronising.  CPU work elsewhere on the host cannot move it when that part is small:
# a sync below this share of a sample (``Measurement.overhead_fraction``), and calls that
# either replay a captured graph or each keep the device busy for far longer than a launch
# takes (a few microseconds), so the host cannot be what paces them.  Otherwise (small
# kernels launched one by one, a copy through host memory) the load flags it as on a CPU.
DEVICE_HOST_SHARE = 0.005
DEVICE_CALL_S = 200e-6

# NVML clock throttle reason bits that mean the clocks were held down by the hardware or
# thermals (power capping at full load is normal and is recorded but not flagged).
THROTTLE_BITS = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
INFO_BITS = {0x1: "idle", 0x2: "application clocks", 0x4: "software power cap", 0x10: "sync boost"}


@dataclass(frozen=True)
class Snapshot:
    """CPU accounting, clocks and GPU state at one instant."""

    wall: float
    busy: float
    steal: float
    own: float
    load: tuple[float, ...]
    cpu_mhz: float | None
    gpus: list[dict[str, Any]] = field(default_factory=list)


def cpu_accounting() -> tuple[float, float]:
    """The host's busy CPU seconds and its hypervisor steal so far, over every CPU."""
    import psutil

    times = psutil.cpu_times()
    busy = sum(getattr(times, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq"))
    return busy, getattr(times, "steal", 0.0)


def snapshot(with_gpus: bool = True) -> Snapshot:
    """Read the host's CPU accounting and (where NVML works) the GPUs' clocks."""
    import psutil

    busy, steal = cpu_accounting()
    own = own_cpu_seconds()
    freq = psutil.cpu_freq()
    gpus = environment.gpus() if with_gpus else []
    return Snapshot(
        wall=time.monotonic(),
        busy=busy,
        steal=steal,
        own=own,
        load=tuple(os.getloadavg()) if hasattr(os, "getloadavg") else (),
        cpu_mhz=freq.current if freq else None,
        gpus=gpus if isinstance(gpus, list) else [],
    )


def in_own_line(raw: str) -> int:
    """``raw`` as a pid when it names this process or an ancestor of it, else 0."""
    import psutil

    if not raw.isdigit() or not psutil.pid_exists(int(raw)):
        return 0
    pid = int(raw)
    try:
        me = psutil.Process()
        return pid if pid == me.pid or any(p.pid == pid for p in me.parents()) else 0
    except psutil.Error:
        return 0


def session_root() -> int:
    """The pid at the root of this session's process tree (this process if none is named)."""
    return in_own_line(os.environ.get(SESSION_PID_ENV, "")) or os.getpid()


def own_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds spent by the session's process tree, reaped children included."""
    import psutil

    try:
        top = psutil.Process(root or session_root())
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        procs = [psutil.Process()]
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue  # it ended between listing and reading: its time went to its parent
        total += t.user + t.system + t.children_user + t.children_system
    return total


def on_device(
    facts: dict[str, Any],
    device: str,
    host_share: float | None,
    call_s: float | None = None,
    graph: bool = False,
    host_memory: bool = False,
) -> dict[str, Any]:
    """The noise facts of a check timed on ``device``, its foreign load judged by its host part.

    ``host_share``: the sync's share of a sample (None: no call was timed alone); ``call_s``:
    the device time of one call; ``graph``: the calls replay a captured graph (no launch per
    call); ``host_memory``: the check moves data through host memory (a CPU's memory load
    reaches it).  A check on the host CPU, or one whose host part is unknown or could pace
    it, keeps its flags.  Otherwise the load stays a fact (``foreign_cores``, and
    ``load_not_flagged`` with the figures) but not a flag: a GPU runner's CPU jobs do not
    blind its GPU checks.  Throttling flags always stay.
    """
    on_host = device.split(":")[0] in ("cpu", "")
    if on_host or host_memory or host_share is None or host_share >= DEVICE_HOST_SHARE:
        return facts
    if not graph and (call_s is None or call_s < DEVICE_CALL_S):
        return facts
    flags = facts.get("flags", [])
    kept = [f for f in flags if f.kind is not FlagKind.FOREIGN_LOAD]
    if len(kept) == len(flags):
        return facts
    reached = {"device": device, "host_share": round(host_share, 6), "graph": graph}
    if call_s is not None:
        reached["call_s"] = round(call_s, 9)
    return {**facts, "flags": kept, "load_not_flagged": reached}


def _reasons(mask: Any, table: dict[int, str]) -> list[str]:
    return [name for bit, name in table.items() if isinstance(mask, int) and mask & bit]


def assess(before: Snapshot, after: Snapshot, accounted_s: float = 0.0) -> dict[str, Any]:
    """Compare two snapshots: the noise facts of the interval, with ``flags`` when suspect.

    ``flags`` holds :class:`~perfsuite.model.NoiseFlag` values (the judge takes them out
    into the result's typed ``noise_flags``).

    ``accounted_s`` is CPU time the check's own processes spent outside the session's tree
    (ranks a scheduler started), which is not foreign load either.
    """
    wall = max(after.wall - before.wall, 1e-9)
    own_s = after.own - before.own + accounted_s
    foreign_s = max(0.0, (after.busy - before.busy) - own_s)
    steal_s = max(0.0, after.steal - before.steal)
    foreign_cores = (foreign_s + steal_s) / wall
    flags = []
    if foreign_cores > FOREIGN_LOAD_CORES and foreign_s + steal_s >= FOREIGN_MIN_SECONDS:
        flags.append(NoiseFlag(FlagKind.FOREIGN_LOAD, cores=foreign_cores))
    gpus = []
    for b, a in zip(before.gpus, after.gpus, strict=False):
        throttled = sorted(
            set(_reasons(b.get("throttle_reasons"), THROTTLE_BITS))
            | set(_reasons(a.get("throttle_reasons"), THROTTLE_BITS))
        )
        gpus.append(
            {
                "index": a.get("index"),
                "sm_clock_mhz": [b.get("sm_clock_mhz"), a.get("sm_clock_mhz")],
                "throttle_reasons": [b.get("throttle_reasons"), a.get("throttle_reasons")],
                "throttled": throttled,
                "info": _reasons(a.get("throttle_reasons"), INFO_BITS),
            }
        )
        if throttled:
            index = a.get("index")
            gpu = index if isinstance(index, int) and not isinstance(index, bool) else None
            flags.append(NoiseFlag(FlagKind.GPU_THROTTLED, gpu=gpu, throttled=tuple(throttled)))
    return {
        "wall_s": round(wall, 6),
        "foreign_cores": round(foreign_cores, 3),
        "steal_cores": round(steal_s / wall, 3),
        "load_average": [list(before.load), list(after.load)],
        "cpu_mhz": [before.cpu_mhz, after.cpu_mhz],
        "governor": environment.governor(),
        "gpus": gpus,
        "flags": flags,
    }
