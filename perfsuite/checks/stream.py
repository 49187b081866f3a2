"""STREAM: copy, scale, add and triad, with bytes counted as STREAM counts them.

Counted words per element (write-allocate traffic is not counted):

    copy   c = a        2   (read a, write c)
    scale  b = q*c      2
    add    c = a + b    3
    triad  a = b + q*c  3

Each array holds at least 4x the last-level cache and at least 1M elements (STREAM's rule),
of float64 (STREAM's 8-byte words).  The reported bandwidth is decimal GB/s (1e9 B/s);
the floor uses the best repetition, as STREAM and DCGM quote it.
"""

from __future__ import annotations

import gc
import inspect
import math
import weakref
from dataclasses import dataclass
from typing import Any

from perfsuite import backends
from perfsuite.backends import Target
from perfsuite.backends.base import STREAM_WORD
from perfsuite.hardware.detect import host_facts
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.measure import pages, probe, readings
from perfsuite.measure.workload import Reference, Workload
from perfsuite.model import Work

WORDS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
KERNELS = tuple(WORDS)
QUICK_KERNEL = "triad"  # quick mode's one kernel: STREAM's headline figure
MIN_ELEMENTS = 1 << 20
CACHE_MULTIPLE = 4
ITEMSIZE = STREAM_WORD.itemsize
# Good HBM reaches 87-95% of peak on a device copy; DCGM-style floors sit at ~0.75x of what
# good hardware reaches, so 0.75 x 0.87 = 0.65 of the datasheet peak.
FLOOR_FRACTION = 0.65
# Used only when neither the profile nor the host says how big the last-level cache is.
FALLBACK_CACHE_BYTES = 256 * 2**20
SEED = 20261122


@dataclass(frozen=True)
class Sizing:
    """How many elements per array, and the cache size that decided it."""

    elements: int
    cache_bytes: int
    cache_source: str

    @property
    def array_bytes(self) -> int:
        """Bytes in one array."""
        return self.elements * ITEMSIZE


def counted_bytes(kernel: str, elements: int, itemsize: int = ITEMSIZE) -> int:
    """Bytes one kernel call moves by STREAM's convention."""
    return WORDS[kernel] * elements * itemsize


def array_elements(cache_bytes: int, itemsize: int = ITEMSIZE) -> int:
    """Elements per array: >= 4x the cache, >= 1M, rounded up to a multiple of 1024."""
    needed = max(MIN_ELEMENTS, math.ceil(CACHE_MULTIPLE * cache_bytes / itemsize))
    return -(-needed // 1024) * 1024


def sizing(target: Target, profile: HardwareProfile) -> Sizing:
    """Size the arrays from the last-level cache of the device being measured.

    An accelerator's own report of its cache wins where it is the larger (an H200 has more
    L2 than an H100, whose figure a datasheet may give for both).
    """
    llc_mib = profile.figure("memory.last_level_cache_mib")
    reported = backends.get(target.backend).cache_bytes(target.device)
    if reported and (profile.kind != target.device_kind or reported > (llc_mib or 0) * 2**20):
        cache, source = reported, f"{target.device} reports it"
    elif profile.kind == target.device_kind and llc_mib:
        cache, source = int(llc_mib * 2**20), f"profile {profile.name}"
    elif target.device_kind == "cpu" and host_facts().last_level_cache_bytes:
        cache, source = int(host_facts().last_level_cache_bytes or 0), "host sysfs"
    else:
        cache, source = FALLBACK_CACHE_BYTES, "unknown; assumed 256 MiB"
    return Sizing(array_elements(cache), cache, source)


def _check_memory(target: Target, size: Sizing, held: bool = False) -> None:
    """Raise MemoryError where the host cannot hold the set (``held``: a, b and c already are)."""
    if target.device_kind != "cpu":
        return
    import psutil

    arrays = (0 if held else 3) + backends.get(target.backend).stream_outputs
    needed = arrays * size.array_bytes
    available = psutil.virtual_memory().available
    if needed > 0.8 * available:
        raise MemoryError(
            f"STREAM needs {arrays} arrays of {size.array_bytes / 2**20:.0f} MiB (4x the "
            f"{size.cache_bytes / 2**20:.0f} MiB last-level cache, {size.cache_source}) but only "
            f"{available / 2**30:.1f} GiB is available"
        )


# The kernels of the last STREAM build, kept for the next kernel on the same backend, device
# and size: STREAM runs its four kernels on one set of arrays.  On the CPU the arrays are one
# host set for every backend (numpy's, torch's and TensorFlow's kernels take the same a, b
# and c), kept until :func:`forget`.  Filling three arrays of 4x the last-level cache with
# random data takes seconds, several times a kernel's samples on a large cache beside other
# work, and a ``perfsuite ab`` side pays for each set in every round.
_kept: dict[tuple[str, str, int], Any] = {}
_host: dict[int, list[Any]] = {}  # elements: the host set's a, b and c


def _kernels(target: Target, size: Sizing) -> Any:
    """The STREAM arrays and kernels for ``target``: the kept set, or a new one."""
    key = (target.backend, target.device, size.elements)
    kernels = _kept.get(key)
    if kernels is None:
        _close_kept()  # the old kernels (and their own arrays) go before the new ones come
        backend = backends.get(target.backend)
        # A backend registered by a plugin may predate the host set: it allocates its own.
        if target.device_kind != "cpu" or not _takes_host(backend):
            _check_memory(target, size)
            kernels = backend.stream_kernels(target.device, size.elements, SEED)
        else:
            if size.elements not in _host:
                _host.clear()  # a host set of another size is freed first
                # A warm A/B side's server frees the pages it kept for this set.
                pages.take(3 * size.array_bytes)
            _check_memory(target, size, held=size.elements in _host)
            if size.elements not in _host:
                from perfsuite.backends.numpy import host_arrays

                _host[size.elements] = host_arrays(size.elements, SEED)
            host = _host[size.elements]
            kernels = backend.stream_kernels(target.device, size.elements, SEED, host=host)
        _kept[key] = kernels
    return kernels


def _takes_host(backend: Any) -> bool:
    return "host" in inspect.signature(backend.stream_kernels).parameters


def _close_kept() -> None:
    for kernels in _kept.values():
        close = getattr(kernels, "close", None)
        if close is not None:
            close()
    _kept.clear()


def forget() -> None:
    """Free the kept arrays and stop their threads (the suite's module does, at its end).

    In a warm ``perfsuite ab`` side, its server then keeps as many pages resident for the
    next round's set (:mod:`perfsuite.measure.pages`).
    """
    _close_kept()
    held = [
        (weakref.ref(memory), memory.nbytes)
        for arrays in _host.values()
        for memory in (x if x.base is None else x.base for x in arrays)
    ]
    _host.clear()
    if held and pages.connected():
        gc.collect()
        # Only what is really gone: a set still referenced (a traceback's frames) stays held.
        freed = sum(nbytes for ref, nbytes in held if ref() is None)
        pages.keep(freed)


def workload(target: Target, kernel: str, profile: HardwareProfile) -> Workload:
    """Build the STREAM workload of one kernel on one target.

    The arrays are shared with the target's other kernels until :func:`forget`: each kernel
    runs on what the one before it wrote, as in STREAM (copy, then scale, add and triad; a
    round of the four scales the values by 15 at most).
    """
    if kernel not in WORDS:
        raise ValueError(f"unknown STREAM kernel {kernel!r}; known: {', '.join(KERNELS)}")
    backend = backends.get(target.backend)
    size = sizing(target, profile)
    kernels = _kernels(target, size)
    nbytes = counted_bytes(kernel, size.elements, kernels.itemsize)
    # The same kernel written bare, on the same device, sampled beside the check (fidelity).
    bare = backend.stream_reference(kernels, kernel, nbytes)
    params: dict[str, Any] = {"kernel": kernel, "backend": target.backend, "device": target.device}
    if readings.follows_host(params):
        # The host's bandwidth with every CPU streaming depends on where the hypervisor put
        # the CPUs (two vCPUs on one chiplet share its link to memory): judged like with
        # like by the probe's link state (see perfsuite/measure/probe.py), even when the check is
        # confined to one CPU, so that a narrower run is compared with the same machine;
        # a farther link only ever speeds it up.
        params["cross_cpu"] = probe.MEMORY_LINKS
    return Workload(
        check="memory_bandwidth",
        params=params,
        metric="bandwidth",
        unit="GB/s",
        work=Work(
            amount=nbytes,
            unit="B",
            convention=f"STREAM: {WORDS[kernel]} words of {kernels.itemsize} B per element",
        ),
        run=getattr(kernels, kernel),
        sync=kernels.sync,
        scale=1e9,
        reference=Reference("memory.bandwidth_gbs", FLOOR_FRACTION, target.device_kind),
        context={
            "elements": size.elements,
            "array_bytes": size.array_bytes,
            "cache_bytes": size.cache_bytes,
            "cache_source": size.cache_source,
            "backend_version": backend.version(),
            **kernels.describe(),
        },
        close=None,  # the arrays outlive the check: forget() frees them
        source=backend.timer(target.device),
        capture=backend.capture(target.device),
        bare=bare,
    )
