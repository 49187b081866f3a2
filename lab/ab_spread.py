"""The spread of ``perfsuite ab``'s round ratios in A/A records, by family of checks.

    python -m lab.ab_spread RECORD.json [RECORD.json ...]

For A/A records (both sides the same stack), each round's log ratio B/A of a check is pure
noise: its spread is what a verdict has to see through, and the rounds a paired test needs
for 95% power at a 10% change grow with its square.  Prints, per family (the check's file and
backend), the rounds pooled over every record, the standard deviation of the log ratio, a
robust one (1.4826 times the median absolute deviation), the share of rounds beyond 25%, and
the rounds needed for 95% power at 10% (((1.96 + 1.64) sd / ln(1/0.9))**2, at least 5).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

FAR = math.log(1.25)
TEN = -math.log(0.9)


def family(check: str) -> str:
    """``test_memory_bandwidth.py numpy`` for a STREAM check over numpy."""
    path, _, rest = check.partition("::")
    backend = rest.partition("[")[2].split("-")[0]
    return f"{path.rsplit('/', 1)[-1]} {backend}"


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args()
    logs: dict[str, list[float]] = defaultdict(list)
    for path in args.records:
        data = json.loads(path.read_text())
        for check in data["checks"]:
            logs[family(check["id"])].extend(check["log_ratios"])
    print("| family | rounds | sd | robust sd | beyond 25% | rounds for 95% at 10% |")
    print("|---|---|---|---|---|---|")
    for name in sorted(logs):
        x = logs[name]
        if len(x) < 3:
            continue
        sd = statistics.stdev(x)
        med = statistics.median(x)
        robust = 1.4826 * statistics.median(abs(v - med) for v in x)
        far = sum(abs(v) > FAR for v in x) / len(x)
        need = max(5, math.ceil(((1.96 + 1.64) * sd / TEN) ** 2))
        print(
            f"| {name} | {len(x)} | {100 * sd:.1f}% | {100 * robust:.1f}% | "
            f"{100 * far:.1f}% | {need} |"
        )


if __name__ == "__main__":
    main()
