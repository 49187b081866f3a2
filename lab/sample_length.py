r"""Does a longer sample steady a check?  A benchmark, not a test.

On an H100 the large 16-bit GEMMs of a quick run follow the GPU's power controller within
the run (bf16 8192³: 720, 621, 627, 674, 681 TFLOP/s in 0.1 s samples), so their within-run
spread (3-7%) leaves the verdict blind to 5%.  This runs the same selection in fresh
processes at several sample lengths (``--perf-sample-seconds``) and prints, per check and
length, the warm-up (mean seconds, and in how many runs it settled: its windows grow with the
sample, up to half the warm-up time left), the within-run sd (log scale, pooled over the
runs as the verdict pools it), the run medians and their max/min, and the wall time per
run::

    python lab/sample_length.py [--seconds 0.1,0.5,1] [--runs 2] [--work DIR] \
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

from lab.verdicts import pytest_run  # noqa: E402 (after the path it needs)
from perfsuite.judge import stats  # noqa: E402


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
    results: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    walls: dict[float, list[float]] = defaultdict(list)
    unit: dict[str, str] = {}
    for i in range(args.runs):
        for seconds in lengths:
            record, wall, _status = pytest_run(
                args.work, f"s{seconds:g}-{i}", [f"--perf-sample-seconds={seconds:g}", *pytest_args]
            )
            walls[seconds].append(wall)
            for r in record["results"]:
                if r.get("samples"):
                    results[r["id"], seconds].append(r)
                    unit[r["id"]] = r["unit"]
            print(f"  {seconds:g} s samples, run {i}: {wall:.0f} s", flush=True)
    if not unit:
        sys.exit("no check measured anything (pytest -rs says why)")
    print("\n| check | sample | warm-up (settled) | within-run sd | run medians | max/min |")
    print("|---|---|---|---|---|---|")
    for check in sorted(unit):
        for seconds in lengths:
            rs = results[check, seconds]
            if not rs:
                continue
            # the within-run level the verdict uses: the runs' log-scale variances, pooled
            lv = stats.levels([r["samples"] for r in rs], higher_is_better=True)
            ms = [r["summary"]["median"] for r in rs]
            policies = [r.get("policy") or r.get("context", {}).get("policy", {}) for r in rs]
            warm = statistics.mean(float(p.get("warmup_s") or 0) for p in policies)
            settled = sum(bool(p.get("warmup_settled")) for p in policies)
            print(
                f"| {check.split('[', 1)[-1].rstrip(']')} | {seconds:g} s "
                f"| {warm:.2f} s ({settled} of {len(rs)}) | {math.sqrt(lv.within_var):.2%} "
                f"| {', '.join(f'{m:.4g}' for m in ms)} {unit[check]} | {max(ms) / min(ms):.3f} |"
            )
    print(
        "\nwall time per run: "
        + ", ".join(f"{s:g} s samples {statistics.median(w):.0f} s" for s, w in walls.items())
    )


if __name__ == "__main__":
    main()
