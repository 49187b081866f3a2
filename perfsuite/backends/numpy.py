"""numpy on the host CPU, using every CPU the process may run on.

One numpy thread does not reach a multi-core machine's memory bandwidth, so each kernel is
split into one contiguous chunk per CPU in the process's affinity mask.  Chunk i always runs
on the same thread, pinned to the i-th CPU of the mask; numpy releases the GIL inside
ufuncs, so the chunks run in parallel.

The arrays are a host set (:func:`host_arrays`) that torch's and TensorFlow's CPU kernels
take too.  On a host whose memory has more than one NUMA node, a thread pinned to the i-th
CPU first-touches (fills) chunk i, so that each chunk's pages land on the node whose CPU
streams them.  On one node, where placement cannot differ, unpinned threads fill it.

The arrays start at chosen offsets within a 4 KiB page (``base.STREAM_PAGE_OFFSETS``): each on
a cache line, and no kernel's store stream less than 1 KiB ahead of one of its load streams
modulo 4 KiB.

Copy is an element-wise ufunc loop (``np.positive`` into the output), STREAM's load and
store, not ``np.copyto``, which hands a contiguous copy to the C library's ``memcpy``, whose
instructions for large copies depend on the CPU and the C library: on an AMD EPYC VM with
glibc, when memory ran fast (57-66 GB/s), ``copyto`` reached 0.61-0.67 of the C copy on the
same arrays and the ufunc loop 0.87-0.99.

The triad has no single numpy ufunc.  It is computed per thread in cache-sized blocks: q*c
into a scratch block the size of the first CPU's L2, then b + scratch into a.  Memory
traffic is then STREAM's: read b and c, write a.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.backends import reference
from perfsuite.backends.base import (
    PAGE_BYTES,
    STREAM_PAGE_OFFSETS,
    STREAM_SCALAR,
    STREAM_WORD,
    Backend,
    page_skip,
)
from perfsuite.measure.loop import Bare

DEFAULT_BLOCK = 32 * 1024  # elements: 256 KiB of float64, where the L2's size is not known


def at_offset(elements: int, offset: int) -> np.ndarray:
    """A float64 array of ``elements`` that starts ``offset`` bytes into a 4 KiB page."""
    raw = np.empty(elements + PAGE_BYTES // STREAM_WORD.itemsize, dtype=STREAM_WORD.dtype)
    skip = page_skip(raw.ctypes.data, offset, raw.itemsize)
    return raw[skip : skip + elements]


def triad_block() -> int:
    """Triad block in elements: the first CPU's L2 in float64 (16-256 Ki), else 32 Ki.

    Every block switches the streams being read (c alone, then b and the scratch block) and
    costs two ufunc calls, so the block should be as large as the L2 holds.  On an AMD EPYC
    VM with a 1 MiB L2 (``lab/triad_probe.py``), against the C triad on the same
    arrays: 128 Ki-element blocks 0.75-0.80 when memory ran at 57-60 GB/s and 0.90-0.94 at
    32-35 GB/s, where 32 Ki blocks reached 0.57-0.60 and 0.78-0.87, and 8 Ki 0.24-0.39; a
    scratch block well past the L2 (8 MiB) did no better than 128 Ki.
    """
    from perfsuite.hardware.detect import core_cache_bytes

    l2 = core_cache_bytes(2)
    if not l2:
        return DEFAULT_BLOCK
    return int(min(max(l2 // 8, 16 * 1024), 256 * 1024))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def memory_nodes() -> int:
    """The NUMA nodes of this host's memory (1 where sysfs does not list them)."""
    return max(1, len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))))


def chunks(elements: int, threads: int) -> list[slice]:
    """One contiguous chunk per thread, each starting on a 4 KiB boundary.

    Every thread's slices then keep the arrays' places in a page (``STREAM_PAGE_OFFSETS``)
    relative to its scratch block, and no page is shared by two threads.
    """
    bounds = np.linspace(0, elements, threads + 1).astype(int)
    bounds[1:-1] -= bounds[1:-1] % (PAGE_BYTES // 8)
    return [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]


def pinned_pools(threads: int) -> tuple[list[ThreadPoolExecutor], bool]:
    """One single-thread pool per chunk, pinned to the i-th CPU of the mask where it has one.

    Returns the pools and whether they are pinned (not where the mask has fewer CPUs).
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    pools = [
        ThreadPoolExecutor(1, thread_name_prefix=f"perfsuite-stream-{i}") for i in range(threads)
    ]
    pinned = len(cpus) >= threads
    if pinned:
        for i, pool in enumerate(pools):
            pool.submit(os.sched_setaffinity, 0, {cpus[i]}).result()
    return pools, pinned


def fill_random(arrays: list[np.ndarray], seed: int) -> None:
    """Fill host arrays in place with uniform random data, a thread per chunk of each.

    numpy's generator, on as many threads as the process may use (unpinned pool threads,
    which first-touch the pages).
    """
    threads = usable_cpus()
    streams = iter(np.random.SeedSequence(seed).spawn(threads * len(arrays)))
    jobs = []
    for values in arrays:
        for part in chunks(values.size, threads):
            jobs.append((np.random.default_rng(next(streams)), values[part]))
    with ThreadPoolExecutor(threads, thread_name_prefix="perfsuite-fill") as pool:
        for done in [pool.submit(rng.random, out=chunk) for rng, chunk in jobs]:
            done.result()


def host_arrays(elements: int, seed: int) -> list[np.ndarray]:
    """A STREAM host set: a, b and c at STREAM's page offsets, filled with random data.

    numpy's, torch's and TensorFlow's CPU kernels all run on such a set (``perfsuite.checks.
    stream`` builds one for all three).  Where memory has more than one NUMA node, the
    thread that streams chunk i (pinned to the i-th CPU) fills it; elsewhere unpinned
    threads do (:func:`fill_random`).
    """
    arrays = [at_offset(elements, STREAM_PAGE_OFFSETS[name]) for name in "abc"]
    if memory_nodes() == 1:
        fill_random(arrays, seed)
        return arrays
    threads = usable_cpus()
    pools, _ = pinned_pools(threads)
    parts = chunks(elements, threads)
    seeds = np.random.SeedSequence(seed).spawn(threads)

    def fill(i: int) -> None:
        rng = np.random.default_rng(seeds[i])
        for values in arrays:
            rng.random(out=values[parts[i]])

    try:
        for done in [pool.submit(fill, i) for i, pool in enumerate(pools)]:
            done.result()
    finally:
        for pool in pools:
            pool.shutdown()
    return arrays


class NumpyStream:
    """STREAM kernels on numpy arrays, chunked over a thread pool."""

    itemsize = STREAM_WORD.itemsize

    def __init__(
        self,
        elements: int,
        seed: int,
        threads: int | None = None,
        host: Sequence[np.ndarray] | None = None,
    ) -> None:
        """Take the host set ``host`` (a, b, c), or build one (:func:`host_arrays`)."""
        self.elements = elements
        self.threads = threads or usable_cpus()
        # One single-thread pool per chunk: chunk i is always streamed by the same thread.
        self.pools, self.pinned = pinned_pools(self.threads)
        self.chunks = chunks(elements, self.threads)
        self.a, self.b, self.c = host if host is not None else host_arrays(elements, seed)
        self.block = triad_block()
        self.scratch = [
            at_offset(self.block, STREAM_PAGE_OFFSETS["scratch"]) for _ in range(self.threads)
        ]

    def parallel(self, fn: Any) -> None:
        """Run ``fn(i)`` for each thread's chunk ``i``, each on its own pinned thread."""
        for future in [pool.submit(fn, i) for i, pool in enumerate(self.pools)]:
            future.result()

    def copy(self) -> None:
        """C = a, as a ufunc load/store loop (see the module's docstring)."""
        self.parallel(lambda i: np.positive(self.a[self.chunks[i]], out=self.c[self.chunks[i]]))

    def scale(self) -> None:
        """B = q*c."""
        self.parallel(
            lambda i: np.multiply(self.c[self.chunks[i]], STREAM_SCALAR, out=self.b[self.chunks[i]])
        )

    def add(self) -> None:
        """C = a + b."""
        self.parallel(
            lambda i: np.add(
                self.a[self.chunks[i]], self.b[self.chunks[i]], out=self.c[self.chunks[i]]
            )
        )

    def triad(self) -> None:
        """A = b + q*c, blocked so the scratch product never leaves the cache."""

        def run(i: int) -> None:
            chunk = self.chunks[i]
            scratch = self.scratch[i]
            for lo in range(chunk.start, chunk.stop, self.block):
                hi = min(lo + self.block, chunk.stop)
                tmp = scratch[: hi - lo]
                np.multiply(self.c[lo:hi], STREAM_SCALAR, out=tmp)
                np.add(self.b[lo:hi], tmp, out=self.a[lo:hi])

        self.parallel(run)

    def sync(self) -> None:
        """Nothing to wait for: every kernel has joined its threads when it returns."""

    def describe(self) -> dict[str, object]:
        """Threads, pinning and blocking used."""
        return {
            "threads": self.threads,
            "pinned": self.pinned,
            "copy_kernel": "np.positive",
            "page_offsets": dict(STREAM_PAGE_OFFSETS),
            "triad_block_elements": self.block,
        }

    def close(self) -> None:
        """Stop the threads."""
        for pool in self.pools:
            pool.shutdown()


class NumpyMatmul:
    """fp32 GEMM through numpy's BLAS (multithreaded over all cores by the BLAS itself)."""

    def __init__(self, m: int, n: int, k: int, seed: int) -> None:
        """Allocate random A, B and the output C."""
        rng = np.random.default_rng(seed)
        self.a = rng.standard_normal((m, k), dtype=np.float32)
        self.b = rng.standard_normal((k, n), dtype=np.float32)
        self.c = np.empty((m, n), dtype=np.float32)

    def run(self) -> None:
        """C = A x B."""
        np.matmul(self.a, self.b, out=self.c)

    def sync(self) -> None:
        """Nothing to wait for: the BLAS call has returned."""

    def describe(self) -> dict[str, object]:
        """The BLAS numpy was built with."""
        return {"blas": blas_library()}

    def close(self) -> None:
        """Nothing to restore."""


def blas_library() -> str:
    """The BLAS numpy was built with: name and version where numpy says (1.26 and later)."""
    try:
        config = np.show_config(mode="dicts") or {}
    except TypeError:  # numpy before 1.26: the build's library names only
        for key in ("blas_ilp64_opt_info", "blas_opt_info"):
            libraries = (getattr(np.__config__, key, None) or {}).get("libraries")
            if libraries:
                return str(libraries[0])
        return "?"
    blas = config.get("Build Dependencies", {}).get("blas", {})
    return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()


class NumpyBackend(Backend):
    """numpy, the reference backend; always available."""

    name = "numpy"
    operations = frozenset({"stream", "matmul"})

    def version(self) -> str:
        """Numpy's version."""
        return np.__version__

    def stream_kernels(
        self, device: str, elements: int, seed: int, host: Sequence[np.ndarray] | None = None
    ) -> NumpyStream:
        """The kernels over the host set ``host``, or over a new one."""
        return NumpyStream(elements, seed, host=host)

    def stream_reference(self, kernels: Any, kernel: str, counted_bytes: int) -> Bare:
        """STREAM's kernel in C, as many threads as the check's, on the check's own arrays."""
        return reference.c_stream(kernel, kernels, STREAM_SCALAR, kernels.threads, counted_bytes)

    def matmul_reference(self, kernel: Any, flops: float) -> Bare:
        """``np.matmul(a, b, out=c)`` in a plain loop, on the check's arrays."""
        k = kernel  # its arrays are read at each call, so closing the kernel frees them
        return reference.bare_loop(
            "np.matmul(a, b, out=c) in a loop",
            lambda: np.matmul(k.a, k.b, out=k.c),
            flops,
            "TFLOP/s",
        )

    def precision_unavailable_reason(self, device: str, precision: str) -> str | None:
        """Only fp32: numpy's BLAS has no 16-bit GEMM."""
        if precision == "fp32":
            return None
        return f"numpy has no {precision} BLAS (its {precision} matmul is not a peak measurement)"

    def matmul(self, device: str, m: int, n: int, k: int, precision: str, seed: int) -> NumpyMatmul:
        """fp32 GEMM on the host."""
        return NumpyMatmul(m, n, k, seed)
