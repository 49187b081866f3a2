"""Every check of one backend in a run record: its best, its bare reference, fidelity, time.

    python lab/backend_table.py reports/<profile>/<run>.json --backend torch \
        [--durations pytest-output.txt]

Prints a Markdown table. Time is the check's call phase as pytest's ``--durations=0``
reported it, when that output is given; else the sampled time (warm-up plus samples).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from perfsuite.model import upgraded


def durations(path: Path | None) -> dict[str, float]:
    """Test name -> call seconds, from pytest's ``--durations=0`` lines."""
    if path is None:
        return {}
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"\s*([\d.]+)s call\s+\S+::(\S+)", line)
        if match:
            found[match.group(2)] = float(match.group(1))
    return found


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--durations", type=Path)
    args = parser.parse_args()
    record = upgraded(json.loads(args.record.read_text()))
    times = durations(args.durations)
    fidelity = {
        row["id"]: row for row in record.get("derived", {}).get("fidelity", {}).get("checks", [])
    }
    print("| check | best | bare reference | fidelity | overhead/sample | time |")
    print("|---|---|---|---|---|---|")
    for r in sorted(record["results"], key=lambda r: r["id"]):
        if r["params"].get("backend") != args.backend:
            continue
        best = max(r["samples"]) if r["higher_is_better"] else min(r["samples"])
        row = fidelity.get(r["id"])
        ref = (row or {}).get("reference") or {}
        ref_text = (
            f"{ref['value']:.4g} ({ref['what']})"
            if ref.get("value")
            else ref.get("unavailable", "-")
        )
        fid = f"{row['fidelity']:.2f}" if row and row.get("fidelity") else "-"
        policy = r.get("policy") or {}
        overhead = policy.get("overhead_fraction")
        name = r["id"].split("::")[-1]
        sampled = (policy.get("warmup_s") or 0) + sum(r.get("seconds") or ())
        took = times.get(name, sampled)
        print(
            f"| {name} | {best:.4g} {r['unit']} | {ref_text} | {fid} | "
            f"{'-' if overhead is None else f'{overhead:.2%}'} | {took:.1f} s |"
        )


if __name__ == "__main__":
    main()
