"""Is a far reading a moment of the machine or a property of one allocation? A probe.

In ``perfsuite ab`` A/A records on the 2-core VM, one check's reading now and then differs
from the other side's by 1.3-2x, while the side's own samples agree within 1% and the
neighbouring checks, a second later, agree.  Two causes fit: a short spell of contention
on the host (time), or the place the check's arrays landed in memory, or the CPUs its
threads landed on (allocation).  They call for different designs: draws spread in time, or
fresh allocations.

This probe times numpy's STREAM triad (the check's own kernel and array size) in blocks of
one warm-up call and three timed calls, alternating three kinds of block:

* ``same``: the same arrays every time, allocated once;
* ``fresh``: arrays allocated, filled and threaded anew for every block;
* ``same2``: a second set of arrays allocated once, as a control for ``same``.

A block's reading is the median of its three calls, in GB/s.  Printed per kind: blocks, the
sd of log(reading / kind's median), the share beyond +-25% and +-10%; and how often a far
``same`` block has a far ``fresh`` neighbour (time) or not (allocation).

    python -m lab.draws [--blocks 150] [--gap 0.2]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from perfsuite.backends.numpy import NumpyStream
from perfsuite.checks.stream import array_elements, counted_bytes
from perfsuite.hardware.detect import host_facts

KINDS = ("same", "fresh", "same2")


def block(stream: NumpyStream, nbytes: int) -> float:
    """One warm-up triad, then three timed: the median rate in GB/s."""
    stream.triad()
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        stream.triad()
        seconds.append(time.perf_counter() - start)
    return nbytes / statistics.median(seconds) / 1e9


def main() -> None:
    """Run the blocks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=150, help="blocks of each kind")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between blocks")
    parser.add_argument("--out", type=Path, help="write every reading here, as JSON")
    args = parser.parse_args()
    elements = array_elements(host_facts().last_level_cache_bytes or 256 * 2**20)
    nbytes = counted_bytes("triad", elements)
    kept = {"same": NumpyStream(elements, 1), "same2": NumpyStream(elements, 2)}
    rows: list[tuple[float, str, float]] = []
    start = time.perf_counter()
    for i in range(args.blocks):
        for kind in KINDS:
            if kind == "fresh":
                stream = NumpyStream(elements, 100 + i)
                rows.append((time.perf_counter() - start, kind, block(stream, nbytes)))
                stream.close()
                del stream
            else:
                rows.append((time.perf_counter() - start, kind, block(kept[kind], nbytes)))
            time.sleep(args.gap)
    print(f"{elements} elements per array; {len(rows)} blocks in {rows[-1][0]:.0f} s")
    logs: dict[str, list[float]] = {}
    for kind in KINDS:
        values = [v for _, k, v in rows if k == kind]
        med = statistics.median(values)
        logs[kind] = [math.log(v / med) for v in values]
    print("| kind | blocks | median GB/s | sd of log | beyond 10% | beyond 25% |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        x = logs[kind]
        med = statistics.median(v for _, k, v in rows if k == kind)
        far10 = sum(abs(v) > math.log(1.1) for v in x) / len(x)
        far25 = sum(abs(v) > math.log(1.25) for v in x) / len(x)
        print(
            f"| {kind} | {len(x)} | {med:.1f} | {100 * statistics.stdev(x):.1f}% | "
            f"{100 * far10:.1f}% | {100 * far25:.1f}% |"
        )
    # A far block of one kind: is a block of another kind, a moment before or after, far too?
    far = math.log(1.1)
    for kind in KINDS:
        hits = both = 0
        for i, x in enumerate(logs[kind]):
            if abs(x) <= far:
                continue
            hits += 1
            others = [logs[o][i] for o in KINDS if o != kind]
            both += any(abs(o) > far for o in others)
        print(f"{kind}: {hits} blocks beyond 10%, {both} with another kind's block beyond too")
    if args.out:
        args.out.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
