"""What a machine-probe reading holds, and which of its rates a check follows.

The probe (:mod:`perfsuite.measure.probe`) reads the machine; a reading is a
:class:`perfsuite.model.MachineReading` of component rates (a probe's mapping is read into
one here).  These functions read one (a rate, the check's own, the link's and whether
it held steady) and say which component a check follows, so that a baseline can keep what
its runs saw and a verdict (:mod:`perfsuite.judge.speed`) can adjust for it.  Nothing here
judges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from perfsuite.model import MachineReading, ProbeRates

# The probe's reading of the link between two CPUs (a cache line handed back and forth).
LINK = "link"
# ``cross_cpu`` of work that shares the CPUs' way to memory, and of work whose threads
# hand data to each other (``True``: recorded before the two were told apart).
MEMORY_LINKS, HANDOFFS = "memory", "handoff"
LINK_STATES = 2.0  # two link readings further apart than this are different states
HANDOFF_BYTES = 1 << 20  # the largest message whose collective the far link only slows


def component_for(unit: str) -> str:
    """Which probe rate a check's metric follows: memory for byte rates, cache otherwise.

    GEMMs, convolutions, collectives and input pipelines move with what the shared cache
    gives them; a register-only loop stays flat while they run at half speed.
    """
    return "memory" if unit.endswith("B/s") else "cache"


def follows_link(params: Mapping[str, Any]) -> bool:
    """Whether a check's work crosses between this host's CPUs.

    Ranks that talk to each other do, and so does work whose threads hand buffers to each
    other (a tf.data pipeline's producer and consumer threads) or share the CPUs' way to
    memory (STREAM on every CPU): ``cross_cpu`` in its params.  On a VM the hypervisor
    moves virtual CPUs between physical cores: two of them sharing a cache and two on
    different chiplets hand a cache line over 4x apart, and shared-memory collectives follow
    (on a 2-core AMD EPYC VM, MPI's 64 KiB allreduce took 25 us in one state and 52-67 us in
    the other, within the same minute), as do the input pipelines (1.28-1.31x slower in the
    far state) and STREAM the other way: two vCPUs on one chiplet share its link to memory
    (a 2-thread copy at 33-36 GB/s against 53-60 on two chiplets, switching every 10-60 s
    on that VM, while one thread stayed at 28-30).
    """
    if not follows_host(params):
        return False
    if params.get("cross_cpu") in (True, MEMORY_LINKS, HANDOFFS):
        return True
    try:
        ranks = int(params.get("ranks", 1) or 1)
    except (TypeError, ValueError):
        return False
    return ranks > 1


def link_effect(params: Mapping[str, Any]) -> int:
    """Which way the far state (two vCPUs on different chiplets) moves a check, or 0.

    +1 for work that shares the CPUs' way to memory (``cross_cpu`` is ``"memory"``: two
    chiplets have two links to memory, so STREAM on every CPU runs faster), -1 for work
    whose CPUs hand data to each other (a pipeline's threads: ``"handoff"``; ranks with
    messages up to ``HANDOFF_BYTES``; the far path is slower), 0 for a check that does not
    follow the link or for which the way is not known (``cross_cpu`` true: older records,
    and checks whose way was not measured).
    """
    if not follows_link(params):
        return 0
    kind = params.get("cross_cpu")
    if kind == MEMORY_LINKS:
        return 1
    if kind == HANDOFFS:
        return -1
    if kind is not None:  # True: a record from before the direction was kept
        return 0
    # Ranks: measured for messages up to 1 MiB (64 KiB 2.1x, 1 MiB 3.5x slower far); a
    # larger one also streams memory, which the far state speeds up.
    size = params.get("size", params.get("total_bytes"))
    return -1 if isinstance(size, int) and size <= HANDOFF_BYTES else 0


def follows_host(params: Mapping[str, Any]) -> bool:
    """Whether a check runs on the host CPU (a GPU check does not move with the host probe)."""
    return str(params.get("device", "cpu")).split(":")[0] == "cpu"


def rate(reading: Any, component: str, source: str | None = None) -> float | None:
    """A reading's rate for one component (only from ``source`` when given), or None."""
    typed = MachineReading.read(reading)
    return typed.rate(component, source) if typed is not None else None


def own_rate(reading: Any) -> float | None:
    """The rate of the component the reading's check follows (its ``component``)."""
    typed = MachineReading.read(reading)
    return typed.own_rate() if typed is not None else None


def source_of(reading: Any) -> str:
    """The probe that took a reading ("" where not known)."""
    typed = MachineReading.read(reading)
    return (typed.source or "") if typed is not None else ""


def stored(reading: Any, link: bool = False) -> MachineReading | None:
    """What a baseline run keeps of a check's reading: its component's rate and source.

    With ``link`` (a check that follows the CPUs' link), the link rate is kept beside it,
    where it was read and held one state over the check (a run measured across two states
    belongs to neither).
    """
    typed = MachineReading.read(reading)
    value = typed.own_rate() if typed is not None else None
    if typed is None or value is None or typed.component is None:
        return None
    kept = {typed.component: value}
    link_rate = typed.rate(LINK) if link else None
    if link_rate is not None and link_steady(typed):
        kept[LINK] = link_rate
    return MachineReading(ProbeRates(**kept), source=typed.source or "", component=typed.component)


def link_edges(reading: Any) -> list[float | None]:
    """The link rates read right before and right after a check (None where not read)."""
    typed = MachineReading.read(reading)
    edges = (typed.before, typed.after) if typed is not None else (None, None)
    return [e.rate(LINK) if e is not None else None for e in edges]


def link_steady(reading: Any) -> bool:
    """Whether the link stayed in one state from the reading before to the one after."""
    edges = link_edges(reading)
    if edges[0] is None or edges[1] is None:
        return True  # one reading (a stored one): nothing to tell
    return abs(math.log(edges[1] / edges[0])) <= math.log(LINK_STATES)
