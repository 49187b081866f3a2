"""The host's memory bandwidth, measured: the CPU profile's ``memory.bandwidth_gbs``.

A CPU's datasheet bandwidth depends on how many channels are populated and at what speed,
which a VM does not show, so the figure is measured once per process: STREAM's copy
(``c = a``, 2 words per element counted, write-allocate not counted) in C, one POSIX thread
per CPU this process may run on, over two arrays of four times the last-level cache (at
least 1M elements, at most an eighth of the memory), one pass discarded, best of
:data:`PASSES`.  It is an *estimate* (a floor against it is a warning, never a failure): a
machine busy with other work while it is measured reads lower, and the STREAM checks and
the roofline are judged against what this host reached, not what it was sold with.

Without a compiler it is numpy's ``copyto`` on one thread, and says so.

The figure is kept for :data:`KEEP_S` in the temporary directory, per boot of the host and
per CPU set, so the processes of one session (xdist workers, ``perfsuite ab``'s sides, every
round of them) reuse one measurement instead of each paying for it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

PASSES = 5
# A pass during which this process ran less than this share of the CPU time it was allowed
# (its threads, or its cgroup's CPU quota if lower, times the pass's wall time) was held
# back: stopped, or descheduled for long spells.  Other work on the host does not show
# this; the process's own CPU clock does.  A burner on one of two cores leaves a share of
# about 0.5-0.75 (and is flagged as foreign load); a process stopped 90% of the time, 0.1.
MIN_RUN_SHARE = 0.25
MIN_ELEMENTS = 1 << 20
COUNTED_WORDS = 2  # STREAM copy: one read, one write
KEEP_S = 6 * 3600.0  # a measurement is reused for this long on the same boot and CPU set


@dataclass(frozen=True)
class Copy:
    """A measured copy rate and how it was measured."""

    gbs: float
    how: str
    foreign_cores: float = 0.0  # other work on the host while it was measured
    loaded: bool = False  # the noise guard flagged that work: the figure is used, not kept
    starved: bool = False  # no pass used MIN_RUN_SHARE of its allowed CPU: used, not kept


def array_elements(llc_bytes: int | None, memory_bytes: int | None) -> int:
    """Doubles per array: 4x the last-level cache, at least 1M, at most memory/8 over two."""
    n = max(MIN_ELEMENTS, 4 * (llc_bytes or 0) // 8)
    if memory_bytes:
        n = min(n, max(MIN_ELEMENTS, memory_bytes // 8 // 2 // 8))
    return n


def _kept_at(llc_bytes: int | None, threads: int) -> Path:
    """Where this boot's measurement for this CPU set and cache is kept."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "no-boot-id"
    key = f"{boot} {llc_bytes} {threads} {os.uname().nodename}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"perfsuite-ref-{os.getuid()}" / f"copy-{digest}.json"


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


@functools.cache
def measured_copy(llc_bytes: int | None) -> Copy | None:
    """The host's STREAM copy rate in GB/s (decimal), kept or measured now; None: cannot."""
    path = _kept_at(llc_bytes, _threads())
    try:
        kept = json.loads(path.read_text())
        if time.time() - float(kept["at"]) < KEEP_S and float(kept["gbs"]) > 0:
            return Copy(float(kept["gbs"]), str(kept["how"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    copy = measure_copy(llc_bytes)
    if copy is not None and not copy.loaded and not copy.starved:
        try:
            path.parent.mkdir(exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}")
            partial.write_text(json.dumps({**asdict(copy), "at": time.time()}))
            os.replace(partial, path)
        except OSError:
            pass  # an unwritable temporary directory: measured again next time
    return copy


def measure_copy(llc_bytes: int | None) -> Copy | None:
    """Measure the host's STREAM copy rate now (see the module's docstring)."""
    import psutil

    from perfsuite.backends.reference import STREAM_KINDS, c_stream_library
    from perfsuite.measure import noise

    # Other work beside the whole measurement, by the noise guard's own rule (its allocation
    # too: CPU time ticks at 10 ms).
    before = noise.snapshot(with_gpus=False)
    n = array_elements(llc_bytes, psutil.virtual_memory().total)
    try:
        a = np.random.default_rng(0).random(n)
        c = np.zeros(n)
    except MemoryError:
        return None
    threads = _threads()
    lib, how = c_stream_library()
    if lib is not None:
        pointer = ctypes.POINTER(ctypes.c_double)
        pa, pc = a.ctypes.data_as(pointer), c.ctypes.data_as(pointer)

        def one() -> None:
            lib.stream_pass(STREAM_KINDS["copy"], pa, pa, pc, n, 0.0, threads)

        what = f"{how}, {threads} threads"
    else:
        threads = 1

        def one() -> None:
            np.copyto(c, a)

        what = f"numpy copyto, 1 thread ({how})"
    one()  # the first pass pays for the pages and the threads: discarded
    walls, shares = timed_passes(one, cpu_allowance(threads))
    best, starved = best_pass(walls, shares)
    facts = noise.assess(before, noise.snapshot(with_gpus=False))
    foreign, loaded = float(facts["foreign_cores"]), bool(facts["flags"])
    gbs = COUNTED_WORDS * 8 * n / best / 1e9
    size = f"{8 * n / 2**20:.0f} MiB"
    if loaded:
        what += f", under {foreign:.2f} cores of other work (not kept)"
    if starved:
        what += (
            f", the process ran at most {max(shares):.0%} of the CPU time it was allowed "
            "in each pass (stopped or held back; not kept)"
        )
    how = f"STREAM copy measured on this host: {what}, 2 arrays of {size}, best of {PASSES}"
    return Copy(gbs, how, foreign, loaded, starved)


def timed_passes(one: Callable[[], None], allowed: float) -> tuple[list[float], list[float]]:
    """Each pass's wall seconds and the share of its allowed CPU time this process ran.

    The share is the process's CPU clock (every thread's) over wall time x ``allowed`` CPUs:
    about 1 for a pass that ran throughout, far less for one the process spent stopped.
    """
    walls, shares = [], []
    for _ in range(PASSES):
        cpu, start = time.process_time(), time.perf_counter()
        one()
        wall = time.perf_counter() - start
        walls.append(wall)
        shares.append((time.process_time() - cpu) / (wall * allowed) if wall > 0 else 0.0)
    return walls, shares


def best_pass(walls: Sequence[float], shares: Sequence[float]) -> tuple[float, bool]:
    """The fastest pass that ran for :data:`MIN_RUN_SHARE`, and whether none did.

    With none, the fastest of all is returned, to be used once and not kept.
    """
    ran = [w for w, share in zip(walls, shares, strict=True) if share >= MIN_RUN_SHARE]
    return min(ran or walls), not ran


def cpu_allowance(threads: int) -> float:
    """CPUs this process may keep busy at once: its threads, or its cgroup's quota if lower."""
    quota = cgroup_cpu_quota()
    return min(float(threads), quota) if quota else float(threads)


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (``cpu.max``, v2; else v1), or None."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        rel = next((line.split(":", 2)[2] for line in own if line.startswith("0::")), "/")
    except (OSError, IndexError):
        rel = "/"
    for where in (root / rel.lstrip("/") / "cpu.max", root / "cpu.max"):
        try:
            limit, period = where.read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(period)
        except (OSError, ValueError, ZeroDivisionError):
            continue
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None
