"""Why does numpy's blocked triad fall behind C's when memory runs fast? A probe, not a test.

The numpy STREAM check computes the triad per thread in blocks: ``q*c`` into a scratch block
that stays in L2, then ``b + scratch`` into ``a``.  That is two ufunc calls, and two GIL
release/re-acquire pairs, per block.  This probe times, in interleaved rounds on the same
arrays (so a machine whose speed drifts moves every variant alike):

* the C reference's triad and copy (one thread per chunk, the check's reference);
* numpy's copy (one ufunc call per thread and pass);
* the check's triad (scratch blocks the size of a core's L2);
* the same with larger and smaller blocks (fewer or more ufunc calls per pass);
* the triad computed into ``a``'s own block instead of a scratch block (no scratch traffic).

If larger blocks close the gap, the per-call cost (GIL hand-offs) is the cause; if writing
into ``a``'s block closes it, the scratch block's extra traffic is.

    python lab/triad_probe.py [--mib 128] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np

from perfsuite.backends import reference
from perfsuite.backends.base import STREAM_PAGE_OFFSETS, STREAM_SCALAR
from perfsuite.backends.numpy import NumpyStream, at_offset
from perfsuite.measure.loop import QUICK, Bare, measure


def best_gbs(bare: Bare) -> float:
    """The best sample of ``bare`` timed alone as a quick check is (warm-up, 5 samples)."""
    if bare.run is None:
        raise SystemExit(f"no C reference: {bare.unavailable}")
    return max(measure(bare.timed(), QUICK).values)


def blocked_triad(stream: NumpyStream, block: int, into_a: bool) -> Callable[[], None]:
    """A step that computes ``a = b + q*c`` per thread, in blocks of ``block`` elements.

    The scratch blocks are allocated (and touched) here, once, not in the timed step.
    """
    scratch = [at_offset(block, STREAM_PAGE_OFFSETS["scratch"]) for _ in range(stream.threads)]
    for block_scratch in scratch:
        block_scratch.fill(0.0)

    def run(i: int) -> None:
        chunk = stream.chunks[i]
        for lo in range(chunk.start, chunk.stop, block):
            hi = min(lo + block, chunk.stop)
            tmp = stream.a[lo:hi] if into_a else scratch[i][: hi - lo]
            np.multiply(stream.c[lo:hi], STREAM_SCALAR, out=tmp)
            np.add(stream.b[lo:hi], tmp, out=stream.a[lo:hi])

    return lambda: stream.parallel(run)


def main() -> None:
    """Print each variant's GB/s per round and its ratio to the C triad of the same round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128, help="size of each array (MiB)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.mib < 1 or args.rounds < 1:
        parser.error("--mib and --rounds must be at least 1")
    stream = NumpyStream(args.mib * 2**20 // 8, seed=0)
    n = stream.elements
    triad_bytes, copy_bytes = 3 * 8 * n, 2 * 8 * n

    def c_kernel(kind: str) -> float:
        counted = triad_bytes if kind == "triad" else copy_bytes
        return best_gbs(reference.c_stream(kind, stream, STREAM_SCALAR, stream.threads, counted))

    def numpy_gbs(step: Callable[[], None], counted: int) -> Callable[[], float]:
        return lambda: best_gbs(reference.bare_loop("numpy", step, counted, "GB/s"))

    variants: dict[str, Callable[[], float]] = {
        "C triad": lambda: c_kernel("triad"),
        "C copy": lambda: c_kernel("copy"),
        "numpy copy": numpy_gbs(stream.copy, copy_bytes),
        f"numpy triad (check, {stream.block // 1024}Ki)": numpy_gbs(stream.triad, triad_bytes),
    }
    for block in (8 * 1024, 32 * 1024, 1024 * 1024):
        variants[f"numpy triad, {block // 1024}Ki scratch"] = numpy_gbs(
            blocked_triad(stream, block, False), triad_bytes
        )
    for block in (32 * 1024, 128 * 1024):
        variants[f"numpy triad, {block // 1024}Ki into a"] = numpy_gbs(
            blocked_triad(stream, block, True), triad_bytes
        )
    print(f"{stream.threads} threads, pinned={stream.pinned}, arrays of {args.mib} MiB")
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        gbs = {name: fn() for name, fn in variants.items()}
        line = "  ".join(f"{name}={value:.1f}" for name, value in gbs.items())
        print(f"round {r + 1}: {line}", flush=True)
        for name, value in gbs.items():
            ratios[name].append(value / gbs["C triad"])
    print("\nratio to the same round's C triad (median, min-max over rounds):")
    for name, values in ratios.items():
        print(
            f"  {name:38s} {statistics.median(values):.2f}  ({min(values):.2f}-{max(values):.2f})"
        )
    stream.close()


if __name__ == "__main__":
    main()
