"""The Horovod rows beside MPI, torch and TensorFlow: allreduce curves and the POP table.

    python lab/horovod/rows.py                 # run the rows here (2 ranks), then print
    python lab/horovod/rows.py RECORD.json...  # print from run records already written

Run it with the ``horovod`` tox environment's Python (``.tox/horovod/bin/python``), or any
environment where ``scripts/horovod-build`` installed Horovod.  Without a record it runs
the allreduce sweep (every backend, 2 ranks, full sizes, the fusion checks) and the POP
check's weak scaling at 1 and 2 ranks (torch DDP, TensorFlow, Horovod), under ``uptime``
readings, and prints Markdown tables from the record that run wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from perfsuite.checks import pop

ROOT = Path(__file__).resolve().parents[2]
METRICS = pop.METRICS


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# Horovod's whole sweep (25 sizes) and both fusion runs; MPI and torch-gloo beside it at the
# default mode's sizes; the POP check's weak scaling at 1 and 2 ranks for every backend.
SELECTIONS = (
    ("suites/test_allreduce.py", "-k", "horovod-cpu-2ranks", "--perf-full"),
    ("suites/test_allreduce.py", "-k", "cpu-2ranks and (mpi or torch)"),
    ("suites/test_scaling.py", "-k", "cpu-weak-2ranks", "--perf-full"),
)


def run_rows(reports: Path) -> list[Path]:
    """Run the rows with this Python, one record per selection; return the records."""
    found: list[Path] = []
    for i, args in enumerate(SELECTIONS):
        print(f"# {' '.join(args)}  (uptime before: {_uptime()})", flush=True)
        out = reports / str(i)
        command = [sys.executable, "-m", "pytest", *args, "--hw=auto", "--perf-ranks", "2"]
        command += ["-p", "no:randomly", "-q", "--perf-report-dir", str(out)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(command, cwd=ROOT, env=env, check=False)
        print(f"# uptime after: {_uptime()}", flush=True)
        found += sorted(out.rglob("*.json"), key=lambda p: p.stat().st_mtime)[-1:]
    if not found:
        raise SystemExit("rows: the runs wrote no record")
    return found


def _fmt(value: float | None, unit: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:.3g} {unit}"


def allreduce_table(derived: dict[str, Any]) -> list[str]:
    """One row per backend: latency at 8 B and 64 KiB, busbw at 16 MiB, the fit, fusion."""
    head = "| backend | ranks | 8 B | 64 KiB | 16 MiB busbw | alpha | 1/beta | fusion speedup |"
    lines = [head + " fusion off / on |", "|---|---|---|---|---|---|---|---|---|"]
    for curve in derived.get("curves", []):
        points = {p["size"]: p for p in curve["points"]}
        fusion = curve.get("fusion") or {}
        effect = curve.get("fusion_effect")
        layout = curve.get("layout") or {}
        name = f"{curve['backend']} ({layout.get('library', '?')})"
        lines.append(
            f"| {name} | {curve['ranks']} "
            f"| {_fmt(points.get(8, {}).get('latency_us'), 'µs')} "
            f"| {_fmt(points.get(65536, {}).get('latency_us'), 'µs')} "
            f"| {_fmt(points.get(16 << 20, {}).get('busbw_gbs'), 'GB/s')} "
            f"| {_fmt(curve.get('alpha_us'), 'µs')} "
            f"| {_fmt(curve.get('fit_bandwidth_gbs'), 'GB/s')} "
            f"| {_fmt(fusion.get('speedup'), 'x')} "
            f"| {_fmt(effect, 'x')} |"
        )
    return lines


def pop_table(derived: dict[str, Any]) -> list[str]:
    """One row per backend, mode and rank count, with every POP efficiency."""
    lines = ["| backend | mode | ranks | " + " | ".join(METRICS) + " |"]
    lines.append("|---" * (3 + len(METRICS)) + "|")
    for series in derived.get("series", []):
        for row in series["rows"]:
            values = " | ".join(_fmt(row.get(m), "").strip() for m in METRICS)
            lines.append(f"| {series['backend']} | {series['mode']} | {row['ranks']} | {values} |")
    return lines


def main() -> None:
    """Run (or read) and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="*", help="run records (default: run now)")
    args = parser.parse_args()
    records = args.records or run_rows(ROOT / "reports" / f"horovod-rows-{int(time.time())}")
    for path in records:
        derived = json.loads(path.read_text()).get("derived", {})
        print(f"\nrecord: {path}")
        if derived.get("allreduce"):
            print("\n".join(allreduce_table(derived["allreduce"])))
        if derived.get("scaling"):
            print("\n".join(pop_table(derived["scaling"])))


if __name__ == "__main__":
    main()
