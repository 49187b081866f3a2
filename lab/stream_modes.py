"""Whether STREAM's bandwidth mode belongs to the allocation or to the host at a moment.

    python -m lab.stream_modes sets [--processes 10] [--sets 3]
    python -m lab.stream_modes series [--seconds 90]
    python -m lab.stream_modes lags [--seconds 300]

``sets``: each of ``--processes`` fresh processes allocates ``--sets`` array sets (three fp64
arrays of 4x the last-level cache each) at once, then measures torch's triad on one set
after the other (median of 7 samples each) and prints one line of GB/s per process.  If the
mode came with the pages a process drew, sets would differ within a process and agree in
time; if it is the host's, a process's sets agree except across a switch in time.

``series``: one process samples triad every 50 ms and prints 2-s bin medians, to show how
long the host keeps a mode.

``lags``: one process samples triad back to back for ``--seconds``, makes readings as an A/B
side does (the median of 3 samples of at least 50 ms), and prints, for lags from 1 s to
2 minutes, the spread (sd) of the log ratio of two readings that far apart, with the rounds
a paired test would need for 95% power at a 10% change.  A round of ``perfsuite ab`` pairs
a check's A and B readings about a side's length apart (30-45 s on the 2-core VM); sides
that took turns check by check would pair them about a second apart.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

from perfsuite.hardware.detect import host_facts

FALLBACK_CACHE = 32 * 2**20


def _elements() -> int:
    cache = host_facts().last_level_cache_bytes or FALLBACK_CACHE
    return 4 * int(cache) // 8


def one_process(sets: int) -> str:
    """The triad bandwidth of each array set, in GB/s."""
    import torch

    n = _elements()
    arrays = [tuple(torch.rand(n, dtype=torch.float64) for _ in range(3)) for _ in range(sets)]
    out = []
    for a, b, c in arrays:
        for _ in range(3):
            torch.add(b, c, alpha=3.0, out=a)
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            torch.add(b, c, alpha=3.0, out=a)
            times.append(time.perf_counter() - t0)
        out.append(3 * 8 * n / float(np.median(times)) / 1e9)
    return " ".join(f"{x:.1f}" for x in out)


def series(seconds: float) -> str:
    """2-s bin medians of triad sampled every 50 ms."""
    import torch

    n = _elements()
    a, b, c = (torch.rand(n, dtype=torch.float64) for _ in range(3))
    start, points = time.monotonic(), []
    while time.monotonic() - start < seconds:
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        points.append((time.monotonic() - start, 3 * 8 * n / (time.perf_counter() - t0) / 1e9))
        time.sleep(0.05)
    at = np.array(points)
    bins = (at[:, 0] // 2).astype(int)
    return " ".join(f"{np.median(at[bins == i, 1]):.0f}" for i in np.unique(bins))


def _readings(seconds: float) -> np.ndarray:
    """(time, GB/s) of back-to-back readings: each the median of 3 samples of >= 50 ms."""
    import torch

    n = _elements()
    a, b, c = (torch.rand(n, dtype=torch.float64) for _ in range(3))
    for _ in range(3):
        torch.add(b, c, alpha=3.0, out=a)
    start, out = time.monotonic(), []
    while time.monotonic() - start < seconds:
        at, samples = time.monotonic() - start, []
        for _ in range(3):
            calls, t0 = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - t0) < 0.05 or calls == 0:
                torch.add(b, c, alpha=3.0, out=a)
                calls += 1
            samples.append(3 * 8 * n * calls / elapsed / 1e9)
        out.append((at, float(np.median(samples))))
    return np.array(out)


# 95% power at a 10% change for a paired test at 0.05 (normal approximation): the rounds.
Z = 1.959964 + 1.644854
CHANGE = -np.log1p(-0.10)


def lags(seconds: float) -> str:
    """The sd of log(reading(t + lag) / reading(t)) for several lags."""
    r = _readings(seconds)
    t, log_bw = r[:, 0], np.log(r[:, 1])
    lines = [
        f"{len(r)} readings in {t[-1]:.0f} s; GB/s median {np.exp(np.median(log_bw)):.1f}, "
        f"5th-95th percentile {np.exp(np.percentile(log_bw, 5)):.1f}"
        f"-{np.exp(np.percentile(log_bw, 95)):.1f}",
        "lag (s) | pairs | sd of log ratio | rounds for 95% power at 10%",
    ]
    for lag in (1, 2, 5, 10, 20, 40, 80, 120):
        later = np.searchsorted(t, t + lag)
        ok = later < len(t)
        if ok.sum() < 10:
            continue
        d = log_bw[later[ok]] - log_bw[ok]
        sd = float(np.std(d, ddof=1))
        lines.append(f"{lag} | {ok.sum()} | {sd:.1%} | {max(5, (Z * sd / CHANGE) ** 2):.0f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["sets", "series", "one", "lags"])
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=90.0)
    args = parser.parse_args()
    if args.what == "one":
        print(one_process(args.sets))
    elif args.what == "series":
        print(series(args.seconds))
    elif args.what == "lags":
        print(lags(args.seconds))
    else:
        for _ in range(args.processes):
            cmd = [sys.executable, "-m", "lab.stream_modes", "one", "--sets", str(args.sets)]
            print(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main()
