"""Slow spells: how often, how deep and how long the machine runs below its own speed.

    python lab/spells.py [--minutes 10] [--size 1024] [--out spells.jsonl]
    python lab/spells.py --out spells.jsonl --summarise

Times one fp32 GEMM (numpy, ``size``^3, on random data allocated once) back to back for
``--minutes``, each call tagged with the wall time, and writes one JSON line per call.  A
*spell* is a stretch of consecutive calls each slower than ``--depth`` times (default 1.4)
the machine's full speed, taken as the 5th percentile of all the calls' times.  The summary
gives the share of time spent in spells, the distribution of their lengths, and the chance
that a moment and the one ``--gap`` seconds later are both slow: whether measuring a check
twice, apart in time, and keeping the faster would step over the spells, or whether they
last too long for that.

Run it alone: anything else on the machine makes its own spells.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def track(minutes: float, size: int, out: Path) -> None:
    """Time GEMMs back to back and write ``{"t": wall, "s": seconds}`` per call."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    c = np.empty((size, size), dtype=np.float32)
    for _ in range(5):  # warm-up: thread pool and caches
        np.matmul(a, b, out=c)
    start = time.monotonic()
    with out.open("w") as f:
        while (now := time.monotonic()) - start < minutes * 60:
            t0 = time.perf_counter()
            np.matmul(a, b, out=c)
            f.write(json.dumps({"t": now - start, "s": time.perf_counter() - t0}) + "\n")


def summarise(out: Path, depth: float, gaps: list[float]) -> None:
    """Print the share of time in spells, their lengths, and the two-measurement odds."""
    try:
        rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        times = np.array([r["t"] for r in rows], dtype=float)
        secs = np.array([r["s"] for r in rows], dtype=float)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
        raise SystemExit(f"{out}: not a track this script wrote ({problem})") from None
    if len(rows) < 100:
        raise SystemExit(f"{out}: only {len(rows)} calls; track for longer")
    full = float(np.quantile(secs, 0.05))
    slow = secs > depth * full
    spells: list[tuple[float, float]] = []  # (start, length in seconds)
    i = 0
    while i < len(slow):
        if slow[i]:
            j = i
            while j + 1 < len(slow) and slow[j + 1]:
                j += 1
            spells.append((float(times[i]), float(times[j] + secs[j] - times[i])))
            i = j + 1
        else:
            i += 1
    span = float(times[-1] + secs[-1] - times[0])
    in_spells = float(secs[slow].sum())
    print(f"{len(rows)} calls over {span / 60:.1f} min, best {secs.min() * 1e3:.1f} ms, "
          f"median {statistics.median(secs) * 1e3:.1f} ms")  # fmt: skip
    limit = f"calls > {depth}x full speed, {full * 1e3:.1f} ms"
    print(f"time in spells ({limit}): {in_spells / span:.1%}")
    if slow.any():
        print(f"depth in spells: median {statistics.median(secs[slow] / full):.2f}x slower")
    lengths = sorted(length for _, length in spells)
    if lengths:
        q = np.quantile(lengths, [0.5, 0.9, 1.0])
        long = sum(1 for v in lengths if v >= 1.0)
        print(f"{len(lengths)} spells: length median {q[0]:.2f} s, 90th {q[1]:.2f} s, "
              f"longest {q[2]:.1f} s; {long} of them 1 s or longer")  # fmt: skip
    for gap in gaps:
        # P(slow at t and slow at t + gap), against P(slow)^2 for independent moments.
        idx = np.searchsorted(times, times + gap)
        ok = idx < len(times)
        if not ok.any():
            continue
        both = float(np.mean(slow[ok] & slow[idx[ok]]))
        p = float(np.mean(slow))
        print(f"a moment and the one {gap:g} s later both slow: {both:.2%} "
              f"(independent moments: {p * p:.2%}; one slow: {p:.1%})")  # fmt: skip


def main() -> None:
    """Track, then summarise (or only summarise)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=Path("spells.jsonl"))
    parser.add_argument("--depth", type=float, default=1.4)
    parser.add_argument("--gap", type=float, action="append", default=[])
    parser.add_argument("--summarise", action="store_true", help="only read --out")
    args = parser.parse_args()
    if args.minutes <= 0 or args.size <= 0 or args.depth <= 1:
        parser.error("--minutes and --size must be positive and --depth above 1")
    if not args.summarise:
        track(args.minutes, args.size, args.out)
    summarise(args.out, args.depth, args.gap or [1.0, 5.0, 30.0, 120.0])


if __name__ == "__main__":
    main()
