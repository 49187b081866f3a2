"""Run-to-run spread: N fresh-process runs of the quick suite, max/min of each check's median.

Usage: python lab/spread.py [--runs 5] [--limit 1.15] [--per-machine-speed]
                                  [--keep DIR] [-- extra pytest args]
       python lab/spread.py --records RUN.json [RUN.json ...] [--per-machine-speed]

Each run is a new ``python -m pytest suites/ --perf-quick`` process (nothing is compared
against a baseline).  For every check the script prints the spread of its run medians
(max / min) and lists the checks above ``--limit`` with the runs' medians, so the cause can
be looked for (warm-up, thread pools, the first run of a session, machine drift).

``--records`` reads run records that already exist instead (for example the A/A reruns that
``lab/verdicts.py`` leaves under its work folder: fresh processes, nothing changed).
``--per-machine-speed`` also divides each CPU check's median by the machine probe's rate
measured beside it (see ``perfsuite/measure/probe.py``), and prints how many checks stay within the
limit once the machine's own drift is taken out.

Every check above the limit gets a reason from the evidence in the records:

* a check with a bare reference (the same operation written bare, one sample of it right
  before each of the check's, see ``perfsuite/backends/reference.py``): when the check's
  ratio to it (the run's fidelity, from pairs of samples) stayed within the limit, or the
  reference's own spread is as large (at least 0.8 of the check's, in log terms), the
  spread is the machine's, since the harness is not in the reference; when the reference
  stayed within the limit and the check did not, it is the harness's; in between, both;
* a collective over ranks: within the limit inside each state of the CPUs' link, or not;
* any other: within the limit per unit of the machine probe's speed, or unexplained.

It also prints each check's fidelity (``derived.fidelity``: the median of the pairs' ratios)
over the runs: median, lowest and highest.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from perfsuite.errors import StorageError
from perfsuite.judge import speed
from perfsuite.measure import readings
from perfsuite.model import MachineReading
from perfsuite.model.baseline import bare_reference_value
from perfsuite.store.records import load_record

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Run the suite N times and report each check's spread."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.15)
    parser.add_argument(
        "--records", nargs="+", type=Path, help="run records to read instead of running the suite"
    )
    parser.add_argument("--per-machine-speed", action="store_true")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the runs' records under DIR/reports/*/*.json (a new or empty folder), for "
        "--records or lab/power_bound.py",
    )
    parser.add_argument(
        "--per-link-state",
        action="store_true",
        help="also the spread within each state of the CPUs' link (see perfsuite/measure/probe.py)",
    )
    parser.add_argument("pytest_args", nargs="*", default=["suites/"])
    args = parser.parse_args()
    if args.keep and args.records:
        parser.error("--keep is for new runs; --records reads runs that exist")
    if args.keep:
        args.keep = args.keep.resolve()  # the suite runs from the repository's root
        if args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
            parser.error(f"--keep {args.keep}: exists and is not an empty folder")
    medians: dict[str, list[float]] = defaultdict(list)
    units: dict[str, str] = {}
    adjusted: dict[str, list[float]] = defaultdict(list)
    if args.records:
        args.runs = len(args.records)
        read_records(args.records, medians, units, adjusted)
    else:
        run_suite(args.runs, args.pytest_args, medians, units, adjusted, args.keep)
    report(medians, units, args.runs, args.limit)
    report_reasons(medians, adjusted, args.runs, args.limit)
    report_fidelity(args.runs)
    if args.per_link_state:
        report_per_link_state(medians, args.runs, args.limit)
    if args.per_machine_speed:
        print("\nper unit of machine speed (CPU checks; each run's median over its probe rate):")
        report(adjusted, {k: f"{units[k]} per probe unit" for k in adjusted}, args.runs, args.limit)


LINKS: dict[str, list[MachineReading | None]] = defaultdict(list)  # check -> kept readings
REFERENCES: dict[str, list[float | None]] = defaultdict(list)  # check -> bare reference rates
FIDELITY: dict[str, list[float]] = defaultdict(list)  # check -> its fidelity, per run
PAIRED: dict[str, list[bool]] = defaultdict(list)  # check -> reference sampled in pairs, per run


def read_records(
    paths: list[Path],
    medians: dict[str, list[float]],
    units: dict[str, str],
    adjusted: dict[str, list[float]],
) -> None:
    """Each check's median from each run record, in the order given."""
    for path in paths:
        try:
            record = load_record(path)
        except StorageError as exc:
            raise SystemExit(f"not a readable run record: {exc}") from None
        for row in (record.derived.get("fidelity") or {}).get("checks", []):
            if row.get("fidelity"):
                FIDELITY[row["id"]].append(float(row["fidelity"]))
        for result in record.results:
            median = float(np.median(result.samples))
            medians[result.id].append(median)
            units[result.id] = result.unit
            machine = result.machine
            LINKS[result.id].append(readings.stored(machine, link=True))
            REFERENCES[result.id].append(bare_reference_value(result.bare_reference))
            bare = result.bare_reference
            PAIRED[result.id].append(bare is not None and bare.paired)
            per_speed = speed.per_speed(median, machine, result.higher_is_better)
            if per_speed is not None:
                adjusted[result.id].append(per_speed)


def run_suite(
    runs: int,
    pytest_args: list[str],
    medians: dict[str, list[float]],
    units: dict[str, str],
    adjusted: dict[str, list[float]],
    keep: Path | None = None,
) -> None:
    """Run the quick suite ``runs`` times in fresh processes and read their records."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or Path(scratch)
        reports = tmp / "reports"
        (tmp / "baselines").mkdir(parents=True)
        for i in range(runs):
            print(f"run {i + 1}/{runs}", flush=True)
            subprocess.run(
                [
                    sys.executable, "-m", "pytest", *pytest_args, "--perf-quick", "-q",
                    "-p", "no:cacheprovider", "--perf-report-dir", str(reports),
                    "--perf-baseline-dir", str(tmp / "baselines"), "--perf-fail-on", "fail",
                ],
                cwd=ROOT,
                env=os.environ,
                check=False,
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        read_records(sorted(reports.glob("*/*.json")), medians, units, adjusted)


def report(medians: dict[str, list[float]], units: dict[str, str], runs: int, limit: float) -> None:
    """Print how many checks stay within ``limit``, then every check, widest spread first."""
    rows = sorted(
        ((max(v) / min(v), k, v) for k, v in medians.items() if len(v) == runs),
        reverse=True,
    )
    within = sum(1 for spread, _, _ in rows if spread <= limit)
    print(f"\n{within} of {len(rows)} checks within {limit} (max/min of {runs} runs)")
    for spread, node, values in rows:
        mark = "  " if spread <= limit else "> "
        shown = ", ".join(f"{v:.4g}" for v in values)
        print(f"{mark}{spread:6.3f}  {node.split('::')[-1]}  [{shown}] {units[node]}")


SAME_SHARE = 0.8  # a reference whose log-spread is this share of the check's "spread as much"


def spread_of(values: list[float]) -> float:
    """The largest value over the smallest (all positive)."""
    return max(values) / min(values)


def reason(node: str, values: list[float], adjusted: list[float], runs: int, limit: float) -> str:
    """What the records say about why a check's run medians spread beyond ``limit``."""
    refs = REFERENCES.get(node, [])
    if len(refs) == runs and all(r for r in refs):
        ref_spread = spread_of([float(r or 0.0) for r in refs])
        fidelity, flags = FIDELITY.get(node, []), PAIRED.get(node, [])
        # check over reference, sample by sample, in every run
        paired = len(fidelity) == len(flags) == runs and all(flags)
        pairs = zip(values, refs, strict=True)
        ratio_spread = spread_of(fidelity if paired else [v / float(r or 1.0) for v, r in pairs])
        figures = f"bare reference {ref_spread:.3f}, check / reference {ratio_spread:.3f}"
        if paired and ratio_spread <= limit:
            return f"machine: the check kept its ratio to the bare reference beside it ({figures})"
        if ref_spread <= limit:
            return f"harness: the bare reference held, the check did not ({figures})"
        if math.log(ref_spread) >= SAME_SHARE * math.log(spread_of(values)):
            return f"machine: the bare operation beside it spread as much ({figures})"
        return f"machine, and more in the check: the bare reference spread less ({figures})"
    groups = speed.link_groups(LINKS.get(node, [])) if len(LINKS.get(node, [])) == runs else None
    if groups is not None and len(groups) > 1:
        worst = max((spread_of([values[i] for i in g]) for g in groups if len(g) > 1), default=1.0)
        sizes = "/".join(str(len(g)) for g in groups)
        if worst <= limit:
            return f"the CPUs' link state: {worst:.3f} within each state (runs per state {sizes})"
        return f"the link state explains part: {worst:.3f} within a state (runs {sizes})"
    if len(adjusted) == runs:
        per_speed = spread_of(adjusted)
        if per_speed <= limit:
            return f"machine: {per_speed:.3f} per unit of the probe's speed"
        return f"unexplained: no bare reference, {per_speed:.3f} per unit of the probe's speed"
    return "unexplained: no bare reference and no probe reading"


def report_reasons(
    medians: dict[str, list[float]], adjusted: dict[str, list[float]], runs: int, limit: float
) -> None:
    """Each check beyond ``limit``, with the reason the records give, and a count per reason."""
    rows = sorted(
        (
            (spread_of(v), k, reason(k, v, adjusted.get(k, []), runs, limit))
            for k, v in medians.items()
            if len(v) == runs and spread_of(v) > limit
        ),
        reverse=True,
    )
    if not rows:
        return
    kinds = Counter(text.split(":")[0] for _, _, text in rows)
    print(f"\nwhy {len(rows)} checks spread beyond {limit}: " + ", ".join(
        f"{n} {kind}" for kind, n in kinds.most_common()
    ))  # fmt: skip
    for spread, node, text in rows:
        print(f"  {spread:6.3f}  {node.split('::')[-1]}: {text}")


def report_fidelity(runs: int) -> None:
    """Each check's fidelity over the runs: median [lowest, highest]."""
    rows = [(k, v) for k, v in FIDELITY.items() if len(v) == runs]
    if not rows:
        return
    print(f"\nfidelity (best / bare reference) over {runs} runs: median [lowest, highest]")
    for node, values in sorted(rows):
        low, mid, high = min(values), statistics.median(values), max(values)
        print(f"  {mid:5.2f} [{low:.2f}, {high:.2f}]  {node.split('::')[-1]}")


def report_per_link_state(medians: dict[str, list[float]], runs: int, limit: float) -> None:
    """The spread within each CPUs'-link state (like with like), for every check."""
    within, rows = 0, []
    for node, values in medians.items():
        groups = speed.link_groups(LINKS[node]) if len(values) == runs else None
        if groups is None:
            continue  # a run without a steady link reading: no states to split by
        spreads = [
            max(values[i] for i in g) / min(values[i] for i in g) for g in groups if len(g) > 1
        ]
        worst = max(spreads, default=1.0)
        within += worst <= limit
        rows.append((worst, node, [len(g) for g in groups]))
    print(f"\n{within} of {len(rows)} checks within {limit} inside every link state")
    for worst, node, sizes in sorted(rows, reverse=True)[:15]:
        print(f"  {worst:6.3f}  {node.split('::')[-1]}  (runs per state: {sizes})")


if __name__ == "__main__":
    main()
