"""How good are the regression verdicts on this machine?  A benchmark, not a test.

It runs the real suite in fresh processes and counts verdicts from the run records:

1. a baseline of ``--baseline-runs`` runs (quick mode, forced into the baseline);
2. A/A: ``--reruns`` further runs of the same code against it: any "regressed" is a false
   alarm, and "noisy" is the share of checks left undecided;
3. power: ``--power-runs`` runs with a 20% slowdown injected into every measured duration
   (``perfsuite/slowdown.py``): the share of checks called "regressed";
4. a real one: the bandwidth checks pinned to one core (``taskset -c 0``), serially and under
   ``-n 2``, against the same baseline, and ``perfsuite compare``'s exit status on it;
5. the same samples judged by pytest-benchmark's ``--benchmark-compare-fail=min:5%`` (against
   the newest baseline run) and by asv's default rule (a factor of 1.1 and its statistical
   test: Mann-Whitney at p < 0.002 where the sample sizes allow it, else non-overlapping 99%
   confidence intervals of the medians).

Usage::

    python lab/verdicts.py [--mode quick|default|full] [--reruns 10] [--backends numpy,tensorflow]
                                  [--select EXPR] [--deadline-s S] [--work DIR]

``--select`` narrows the suite with pytest's ``-k`` (on a GPU machine, say, ``"gpu and
(test_stream or test_gemm)"``); the family is then the checks selected, and the pinned runs
are skipped (the baseline may lack their checks).  ``--deadline-s`` stops starting A/A and
power runs that would end past it (judged by the longest run so far; the baseline and
pinned runs always run); the A/A and power runs alternate after the baseline, so a deadline
cuts both alike, and the tables say how many ran.

``--mode default`` runs the suite's default mode: the quick suite's checks with the
full-mode policy, so quick and default are judged in a family of the same size.  ``--mode
full`` runs ``--perf-full``: every case of each sweep.  It prints Markdown
tables (the README and lab/measurements.md keep them) and writes everything under
``--work``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special
from scipy import stats as sps

ROOT = Path(__file__).resolve().parent.parent
BANDWIDTH = "suites/test_memory_bandwidth.py"


def _counts_sessions(root: Path) -> bool:
    """Whether the checkout at ``root`` has ``--perf-baseline-window``."""
    options = root / "perfsuite" / "options.py"
    return options.is_file() and "--perf-baseline-window" in options.read_text()


def pytest_run(
    work: Path,
    name: str,
    args: list[str],
    env: dict[str, str] | None = None,
    pin: bool = False,
    root: Path = ROOT,
) -> tuple[dict[str, Any], float, int]:
    """One fresh pytest process in the checkout ``root``; its run record, wall time and status."""
    reports = work / "reports" / name
    cmd = [
        *(["taskset", "-c", "0"] if pin else []),
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "perfsuite.slowdown",
        "--hw=auto",
        "--perf-html=no",
        f"--perf-report-dir={reports}",
        f"--perf-baseline-dir={work / 'baselines'}",
        # The baseline runs here are taken back to back, standing in for runs hours apart:
        # each counts as its own session (in a checkout that counts sessions at all).
        *(["--perf-baseline-window=0"] if _counts_sessions(root) else []),
        *args,
    ]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    paths = sorted(reports.glob("*/*.json"), key=lambda p: p.stat().st_mtime)
    if not paths:
        sys.exit(f"no run record from {' '.join(cmd)}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return json.loads(paths[-1].read_text()), wall, proc.returncode


def judged(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Results that were compared with a baseline."""
    return [r for r in record["results"] if r["baseline"]["verdict"] != "new"]


def baseline_runs(work: Path) -> dict[str, list[list[float]]]:
    """Each check's accepted runs, from the saved baseline file."""
    (path,) = (work / "baselines").glob("*/baseline.json")
    data = json.loads(path.read_text())
    return {k: [r["samples"] for r in e["runs"]] for k, e in data["entries"].items()}


def pytest_benchmark_rule(cur: list[float], base: list[float], hib: bool) -> str:
    """--benchmark-compare-fail=min:5% against one saved run: the fastest time, 5% worse."""
    best_cur = max(cur) if hib else min(cur)
    best_base = max(base) if hib else min(base)
    worse = best_cur < best_base / 1.05 if hib else best_cur > best_base * 1.05
    return "regressed" if worse else "ok"


def _ci99(x: list[float]) -> tuple[float, float]:
    ci = sps.quantile_test(np.asarray(x), q=float(np.median(x)), p=0.5).confidence_interval(0.99)
    low = ci.low if math.isfinite(ci.low) else min(x)
    high = ci.high if math.isfinite(ci.high) else max(x)
    return float(low), float(high)


def asv_rule(cur: list[float], base: list[float], hib: bool) -> str:
    """The default rule of asv compare: a factor of 1.1 and a significant difference."""
    # asv works on times; a rate's samples are inverted to times.
    t_cur = [1 / v for v in cur] if hib else list(cur)
    t_base = [1 / v for v in base] if hib else list(base)
    ratio = float(np.median(t_cur) / np.median(t_base))
    p_min = 1 / special.comb(len(t_cur) + len(t_base), min(len(t_cur), len(t_base)))
    if p_min < 0.002:
        different = sps.mannwhitneyu(t_cur, t_base, alternative="two-sided").pvalue < 0.002
    else:
        (a0, a1), (b0, b1) = _ci99(t_base), _ci99(t_cur)
        different = not (a1 >= b0 and a0 <= b1)
    if different and ratio > 1.1:
        return "regressed"
    if different and ratio < 1 / 1.1:
        return "improved"
    return "ok"


def tally(
    records: list[dict[str, Any]], base: dict[str, list[list[float]]], slowed_only: bool = False
) -> dict[str, Any]:
    """Verdict shares over every judged result of the records, for each rule.

    ``slowed_only``: only the results an injected slowdown reaches (not a ratio's, such as a
    POP efficiency, which ``perfsuite.slowdown`` leaves as measured): the power runs' tally.
    """
    counts: dict[str, Counter[str]] = {
        "perfsuite": Counter(),
        "pytest-benchmark": Counter(),
        "asv": Counter(),
    }
    blind = 0
    for record in records:
        for r in judged(record):
            runs = base.get(r["id"])
            if not runs or (slowed_only and r.get("unit") == "ratio"):
                continue
            counts["perfsuite"][r["baseline"]["verdict"]] += 1
            # "blind" in records of schema 1
            blind += bool(r["baseline"].get("cannot_detect") or r["baseline"].get("blind"))
            hib = r["higher_is_better"]
            counts["pytest-benchmark"][pytest_benchmark_rule(r["samples"], runs[-1], hib)] += 1
            counts["asv"][asv_rule(r["samples"], runs[-1], hib)] += 1
    total = sum(counts["perfsuite"].values())
    return {"counts": counts, "total": total, "blind": blind}


def share(c: Counter[str], key: str, total: int) -> str:
    return f"{c[key] / total:.1%}" if total else "-"


def alternate(reruns: int, power_runs: int) -> list[str]:
    """The order of the A/A ("aa") and power runs: alternating while both last."""
    out = []
    for i in range(max(reruns, power_runs)):
        if i < reruns:
            out.append("aa")
        if i < power_runs:
            out.append("power")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["quick", "default", "full"], default="quick")
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--reruns", type=int, default=10)
    parser.add_argument("--power-runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=ROOT / "reports" / "verdict-benchmark")
    parser.add_argument("--skip-taskset", action="store_true")
    parser.add_argument(
        "--reuse-baseline",
        metavar="TAG",
        default="",
        help="keep WORK's baseline and its runs, and judge new A/A and power runs against it, "
        "named aa-TAG-i and power-TAG-i (after a change to the judging, not the measuring)",
    )
    parser.add_argument("--select", default="", help="pytest -k expression for the suite")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=0.0,
        help="start no run that would end more than this many seconds after the start",
    )
    parser.add_argument(
        "--backends",
        default="",
        help="comma-separated backends to run (--perf-backend); default: every installed one",
    )
    args = parser.parse_args()
    if args.deadline_s < 0 or min(args.baseline_runs, args.reruns) < 1 or args.power_runs < 0:
        parser.error("--deadline-s >= 0, --baseline-runs and --reruns >= 1, --power-runs >= 0")
    work = args.work / args.mode
    if not args.reuse_baseline:
        shutil.rmtree(work, ignore_errors=True)
    elif not (work / "baselines").is_dir():
        sys.exit(f"--reuse-baseline: no baseline under {work}")
    tag = f"-{args.reuse_baseline}" if args.reuse_baseline else ""
    mode_args = {"quick": ["--perf-quick"], "default": [], "full": ["--perf-full"]}[args.mode]
    if args.backends:
        mode_args = [*mode_args, "--perf-backend", args.backends]
    # the selection narrows the suite's runs (the pinned runs are skipped with it)
    suite = ["suites/", *mode_args, *(["-k", args.select] if args.select else [])]
    started = time.perf_counter()

    # Wall times of every run in this work folder, kept so that a later call with
    # --reuse-baseline knows how long a run takes before its first one starts.
    walls_file = work / "walls.json"
    walls: dict[str, list[float]] = (
        json.loads(walls_file.read_text()) if tag and walls_file.is_file() else {}
    )

    def run(name: str, extra: list[str], **kw: Any) -> dict[str, Any]:
        record, wall, status = pytest_run(work, name, [*suite, *extra], **kw)
        walls.setdefault(name.split("-")[0], []).append(wall)
        walls_file.write_text(json.dumps(walls))
        n = len(judged(record))
        verdicts = Counter(r["baseline"]["verdict"] for r in record["results"])
        print(f"  {name}: {wall:.0f} s, exit {status}, {n} judged: {dict(verdicts)}", flush=True)
        return record

    reused = f"reused from {work / 'baselines'}"
    print(f"baseline: {reused if tag else f'{args.baseline_runs} runs'} ({args.mode})", flush=True)
    for i in range(0 if tag else args.baseline_runs):
        run(f"baseline-{i}", ["--perf-save-baseline", "--perf-force-baseline"])
    base = baseline_runs(work)
    print(
        f"A/A: {args.reruns} reruns; power: {args.power_runs} runs with a 20% slowdown "
        "(alternating)",
        flush=True,
    )
    slow = {"PERFSUITE_INJECT_SLOWDOWN": "0.2"}
    aa: list[dict[str, Any]] = []
    power: list[dict[str, Any]] = []

    def time_left() -> bool:
        if not args.deadline_s:
            return True
        longest = max((w for v in walls.values() for w in v), default=0.0)
        if time.perf_counter() - started + longest <= args.deadline_s:
            return True
        print(f"  deadline: {args.deadline_s:.0f} s would pass; no further run", flush=True)
        return False

    for kind in alternate(args.reruns, args.power_runs):
        if not time_left():
            break
        if kind == "aa":
            aa.append(run(f"aa{tag}-{len(aa)}", []))
        else:
            power.append(run(f"power{tag}-{len(power)}", [], env=slow))
    if not aa:
        sys.exit("no A/A run finished: the deadline came before the first")

    pinned: dict[str, dict[str, Any]] = {}
    compare_status: dict[str, int] = {}
    if args.select and not args.skip_taskset:
        print("pinned runs: skipped (--select leaves the baseline without all their checks)")
    if not args.skip_taskset and not args.select:
        for label, extra in (("serial", []), ("xdist", ["-n", "2"])):
            record, _wall, status = pytest_run(
                work, f"taskset{tag}-{label}", [BANDWIDTH, *mode_args, *extra], pin=True
            )
            pinned[label] = record
            a_paths = sorted((work / "reports").glob("baseline-*/*/*.json"))
            b_path = sorted((work / "reports" / f"taskset{tag}-{label}").glob("*/*.json"))[-1]
            cmp = subprocess.run(
                [sys.executable, "-m", "perfsuite", "compare", *map(str, a_paths), str(b_path)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            compare_status[label] = cmp.returncode
            verdicts = Counter(r["baseline"]["verdict"] for r in judged(record))
            print(
                f"  taskset -c 0 ({label}): pytest exit {status}, {dict(verdicts)}, "
                f"perfsuite compare exit {cmp.returncode}",
                flush=True,
            )

    aa_t, power_t = tally(aa, base), tally(power, base, slowed_only=True)
    family = aa[0]["settings"].get("family", {})
    print(f"\n### Verdicts, {args.mode} mode ({os.cpu_count()} cores)\n")
    print(
        f"Baseline of {args.baseline_runs} runs; family of {family.get('size')} checks "
        f"(first threshold {family.get('first_threshold', 0):.2g}); {len(aa)} A/A reruns "
        f"({aa_t['total']} verdicts); {len(power)} runs with a 20% slowdown "
        f"({power_t['total']} verdicts).\n"
    )
    print("| rule | A/A regressed | A/A noisy | power at 20% (regressed) |")
    print("|---|---|---|---|")
    for rule in ("perfsuite", "asv", "pytest-benchmark"):
        a, p = aa_t["counts"][rule], power_t["counts"][rule]
        noisy = share(a, "noisy", aa_t["total"]) if rule == "perfsuite" else "n/a"
        print(
            f"| {rule} | {share(a, 'regressed', aa_t['total'])} | {noisy} "
            f"| {share(p, 'regressed', power_t['total'])} |"
        )
    print(
        f"\nperfsuite checks that said they could not detect their tolerance: "
        f"{aa_t['blind']} of {aa_t['total']} A/A verdicts."
    )
    if pinned:
        print(
            "\n| taskset -c 0, bandwidth checks | perfsuite | asv | pytest-benchmark "
            "| perfsuite compare exit |"
        )
        print("|---|---|---|---|---|")
        for label, record in pinned.items():
            t = tally([record], base)
            cells = [
                f"{t['counts'][rule]['regressed']} of {t['total']} regressed"
                for rule in ("perfsuite", "asv", "pytest-benchmark")
            ]
            print(f"| {label} | " + " | ".join(cells) + f" | {compare_status[label]} |")
    print(
        "\nwall time per run: " + ", ".join(f"{k} {np.median(v):.0f} s" for k, v in walls.items())
    )


if __name__ == "__main__":
    main()
