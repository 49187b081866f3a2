"""Is a STREAM level the process's, or its arrays' place in physical memory?  A probe.

Some hours, ``perfsuite ab``'s two sides read a STREAM check at levels 20-30% apart though
their samples alternate a tenth of a second apart (``lab/measurements.md``, "What is left:
STREAM's process level").  If the level follows the physical pages the arrays landed on
(in a VM, host memory on one NUMA node or another), array sets placed far apart within one
process would read at different levels too, and a check could rotate over them.  If it is
the process's, they would not.

Each pair starts two fresh processes, A and B, at once.  Each allocates ``--sets`` STREAM
array sets of the check's size (numpy or torch), touching ``--ballast`` GiB of memory
between them so that the sets land on different physical pages.  The two then alternate
blocks in lockstep, as ``perfsuite ab``'s sides alternate samples: a warm call and three
timed calls on one set, the sets in turn.  The probe runs as root to read each set's
physical place (``/proc/self/pagemap``); otherwise the place prints as ``-``.

Printed per pair: each set's median GB/s and the median GiB of its pages.  Then: the sd
of log(A/B) of the two sides' levels across pairs (the process part, doubled), the sd of a
set's level around its side's (the placement part), and the sd of a block's median around
its set's (the moment part).

    python -m lab.side_levels [--pairs 4] [--sets 3] [--ballast 2] [--backend numpy]
"""

from __future__ import annotations

import argparse
import math
import statistics
import struct
import time
from multiprocessing import Pipe, Process
from multiprocessing.connection import Connection
from typing import Any

KERNEL = "scale"
BLOCKS = 12  # blocks per set and side


def _gib(address: int, nbytes: int) -> float | None:
    """Median physical place, in GiB, of a buffer's pages (one per 2 MiB), if readable."""
    places = []
    try:
        with open("/proc/self/pagemap", "rb") as pagemap:
            for offset in range(0, nbytes, 2 << 20):
                pagemap.seek((address + offset) // 4096 * 8)
                entry = struct.unpack("<Q", pagemap.read(8))[0]
                frame = entry & ((1 << 55) - 1)
                if entry >> 63 and frame:
                    places.append(frame * 4096 / 2**30)
    except OSError:
        return None
    return statistics.median(places) if places else None


def _side(conn: Connection, backend: str, sets: int, ballast_gib: float, seed: int) -> None:
    """One side: allocate the sets apart, then time a block whenever told to."""
    import numpy as np

    from perfsuite.checks.stream import array_elements, counted_bytes
    from perfsuite.hardware.detect import host_facts

    elements = array_elements(host_facts().last_level_cache_bytes or 256 * 2**20)
    streams: list[Any] = []
    held = []
    for i in range(sets):
        if backend == "torch":
            from perfsuite.backends.torch import TorchStream

            streams.append(TorchStream("cpu", elements, seed + i))
        else:
            from perfsuite.backends.numpy import NumpyStream

            streams.append(NumpyStream(elements, seed + i))
        if ballast_gib:
            block = np.empty(int(ballast_gib * 2**30 / 8))
            block.fill(1.0)
            held.append(block)
    places = []
    for stream in streams:
        a = stream.a
        address = a.ctypes.data if hasattr(a, "ctypes") else a.data_ptr()
        nbytes = a.nbytes if hasattr(a, "nbytes") else a.numel() * a.element_size()
        places.append(_gib(address, nbytes))
    nbytes_counted = counted_bytes(KERNEL, elements)
    blocks: list[list[float]] = [[] for _ in streams]
    conn.send("ready")
    while (which := conn.recv()) is not None:
        run = getattr(streams[which], KERNEL)
        run()
        seconds = []
        for _ in range(3):
            start = time.perf_counter()
            run()
            seconds.append(time.perf_counter() - start)
        blocks[which].append(nbytes_counted / statistics.median(seconds) / 1e9)
        conn.send("done")
    conn.send((blocks, places))


def _pair(backend: str, sets: int, ballast_gib: float, seed: int) -> list[Any]:
    """Run A and B in lockstep; return each side's blocks per set and the sets' places."""
    ends = []
    for side in range(2):
        here, there = Pipe()
        proc = Process(target=_side, args=(there, backend, sets, ballast_gib, seed + 10 * side))
        proc.start()
        ends.append((here, proc))
    for here, _ in ends:
        here.recv()
    for block in range(BLOCKS * sets):
        order = ends if block % 4 in (0, 3) else ends[::-1]  # A B B A ...
        for here, _ in order:
            here.send(block % sets)
            here.recv()
    results = []
    for here, proc in ends:
        here.send(None)
        results.append(here.recv())
        proc.join()
    return results


def main() -> None:
    """Run the pairs and print the levels and their parts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--ballast", type=float, default=2.0, help="GiB held between sets")
    parser.add_argument("--backend", default="numpy", choices=["numpy", "torch"])
    args = parser.parse_args()
    side_logs, set_logs, block_logs = [], [], []
    for pair in range(args.pairs):
        sides = _pair(args.backend, args.sets, args.ballast, 100 * pair)
        levels = []
        for name, (blocks, places) in zip("AB", sides, strict=True):
            medians = [statistics.median(b) for b in blocks]
            level = statistics.median(medians)
            levels.append(level)
            set_logs += [math.log(m / level) for m in medians]
            block_logs += [math.log(x / m) for b, m in zip(blocks, medians, strict=True) for x in b]
            shown = "  ".join(
                f"{m:5.1f} GB/s @ {'-' if p is None else f'{p:.1f}'} GiB"
                for m, p in zip(medians, places, strict=True)
            )
            print(f"pair {pair + 1} {name}: {shown}")
        side_logs.append(math.log(levels[1] / levels[0]))

    def sd(logs: list[float]) -> str:
        return f"{100 * statistics.stdev(logs):.1f}%" if len(logs) > 1 else "-"

    print(f"\n{args.backend} {KERNEL}, {args.pairs} pairs, {args.sets} sets a side:")
    print(f"  sd of log(B/A), the sides' levels across pairs: {sd(side_logs)}")
    print(f"  sd of a set's level around its side's:          {sd(set_logs)}")
    print(f"  sd of a block around its set's level:           {sd(block_logs)}")


if __name__ == "__main__":
    main()
