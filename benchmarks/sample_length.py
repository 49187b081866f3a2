r"""Does a longer sample steady a check?  A benchmark, not a test.

On an H100 the large 16-bit GEMMs of a quick run follow the GPU's power controller within
the run (bf16 8192³: 720, 621, 627, 674, 681 TFLOP/s in 0.1 s samples), so their within-run
spread (3-7%) leaves the verdict blind to 5%.  This runs the same selection in fresh
processes at several sample lengths (``--perf-sample-seconds``) and prints, per check and
length, the warm-up (mean seconds, and in how many runs it settled: its windows grow with the
sample, up to half the warm-up time left), the within-run sd (log scale, the mean over runs),
the run medians and their max/min, and the wall time per run::

    python benchmarks/sample_length.py [--seconds 0.1,0.5,1] [--runs 2] [--work DIR] \
        -- suites/test_gemm.py -k "gpu and 8192x8192x8192" --perf-quick --perf-backend torch

Lengths are run in turn (0.1, 0.5, 1, 0.1, ...), so a drift of the machine falls on all
alike.  Everything after ``--`` is passed to pytest.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.verdicts import pytest_run  # noqa: E402 (after the path it needs)


def run(
    work: Path, seconds: float, index: int, pytest_args: list[str]
) -> tuple[dict[str, Any], float]:
    """One fresh pytest process at this sample length; its run record and wall time."""
    record, wall, _status = pytest_run(
        work, f"s{seconds:g}-{index}", [f"--perf-sample-seconds={seconds:g}", *pytest_args]
    )
    return record, wall


def within_sd(samples: list[float]) -> float:
    """Standard deviation of the samples' logs (0 for fewer than two)."""
    logs = [math.log(v) for v in samples if v > 0]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", default="0.1,0.5,1", help="sample lengths, comma-separated")
    parser.add_argument("--runs", type=int, default=2, help="fresh runs per length")
    parser.add_argument("--work", type=Path, default=ROOT / "reports" / "sample-length")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    lengths = [float(s) for s in args.seconds.split(",") if s.strip()]
    if not lengths or min(lengths) <= 0 or args.runs < 1:
        parser.error("--seconds: positive lengths; --runs: at least 1")
    pytest_args = [a for a in args.pytest_args if a != "--"]
    shutil.rmtree(args.work / "reports", ignore_errors=True)  # no record of an earlier call
    (args.work / "baselines").mkdir(parents=True, exist_ok=True)  # none: every check is new
    sds: dict[tuple[str, float], list[float]] = defaultdict(list)
    medians: dict[tuple[str, float], list[float]] = defaultdict(list)
    warmups: dict[tuple[str, float], list[tuple[float, bool]]] = defaultdict(list)
    walls: dict[float, list[float]] = defaultdict(list)
    unit: dict[str, str] = {}
    for i in range(args.runs):
        for seconds in lengths:
            record, wall = run(args.work, seconds, i, pytest_args)
            walls[seconds].append(wall)
            for r in record["results"]:
                if not r.get("samples"):
                    continue
                sds[r["id"], seconds].append(within_sd(r["samples"]))
                medians[r["id"], seconds].append(r["summary"]["median"])
                policy = r.get("context", {}).get("policy", {})
                warmups[r["id"], seconds].append(
                    (float(policy.get("warmup_s") or 0), bool(policy.get("warmup_settled")))
                )
                unit[r["id"]] = r["unit"]
            print(f"  {seconds:g} s samples, run {i}: {wall:.0f} s", flush=True)
    if not unit:
        sys.exit("no check measured anything (pytest -rs says why)")
    print("\n| check | sample | warm-up (settled) | within-run sd | run medians | max/min |")
    print("|---|---|---|---|---|---|")
    for check in sorted(unit):
        for seconds in lengths:
            ms = medians[check, seconds]
            if not ms:
                continue
            sd = statistics.mean(sds[check, seconds])
            cells = ", ".join(f"{m:.4g}" for m in ms)
            warm = warmups[check, seconds]
            warm_cell = (
                f"{statistics.mean(w for w, _ in warm):.2f} s "
                f"({sum(ok for _, ok in warm)} of {len(warm)})"
            )
            print(
                f"| {check.split('[', 1)[-1].rstrip(']')} | {seconds:g} s | {warm_cell} "
                f"| {sd:.2%} | {cells} {unit[check]} | {max(ms) / min(ms):.3f} |"
            )
    print(
        "\nwall time per run: "
        + ", ".join(f"{s:g} s samples {statistics.median(w):.0f} s" for s, w in walls.items())
    )


if __name__ == "__main__":
    main()
