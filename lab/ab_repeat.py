"""``perfsuite ab`` repeated, to count how often a real A/B run gives each verdict.

Runs ``perfsuite ab`` ``--reps`` times in a row, A and B both this interpreter unless
``--b-env`` makes B differ (``PERFSUITE_INJECT_SLOWDOWN=0.1`` for power), each repetition
with its own output folder and round-order seed, then counts the checks' verdicts over all
repetitions: for an A/A, every ``regressed`` or ``improved`` is a false alarm.

    python -m lab.ab_repeat --reps 10 --work reports/ab-repeat [--budget 10m]
        [--b-env NAME=VALUE] [--interleave samples|checks|processes] --
        suites/test_memory_bandwidth.py suites/test_gemm.py
        suites/test_conv_roofline.py
    python -m lab.ab_repeat --work reports/ab-repeat --tally-only

``--burner steady`` runs a CPU burner (``while True: pass``) beside every repetition, taking
one core for the whole run; ``--burner bursty`` turns it on and off (``--burst ON,OFF``
seconds, 3,3 by default).  It is started here, outside ``perfsuite ab``'s process tree, so
the sides' noise guards see it as the foreign load it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from perfsuite.ab.rounds import INTERLEAVES
from perfsuite.ab.run import parse_budget

VERDICTS = ("regressed", "improved", "same", "unknown")

# A burner that turns itself on for ON seconds and off for OFF seconds, forever.
BURSTY = """
import sys, time
on, off = float(sys.argv[1]), float(sys.argv[2])
while True:
    end = time.monotonic() + on
    while time.monotonic() < end:
        pass
    time.sleep(off)
"""


@contextlib.contextmanager
def burner(kind: str, burst: tuple[float, float]) -> Iterator[None]:
    """A CPU burner beside the block: none, steady (one core throughout) or bursty."""
    if kind == "none":
        yield
        return
    if kind == "steady":
        cmd = [sys.executable, "-c", "while True: pass"]
    else:
        cmd = [sys.executable, "-c", BURSTY, str(burst[0]), str(burst[1])]
    proc = subprocess.Popen(cmd)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


def main() -> None:
    """Run the repetitions, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--interleave", choices=INTERLEAVES, default=INTERLEAVES[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--burner", choices=["none", "steady", "bursty"], default="none")
    parser.add_argument("--burst", default="3,3", help="bursty: seconds on,off")
    parser.add_argument("--samples", type=int, default=0, help="perfsuite ab --samples")
    parser.add_argument("--sides", choices=["forked", "fresh"], default="forked")
    parser.add_argument("--sample-seconds", default="", help="perfsuite ab --sample-seconds")
    parser.add_argument("--tally-only", action="store_true", help="count earlier records only")
    parser.add_argument(
        "--stop-by",
        type=float,
        default=0.0,
        help="start no repetition that would end after "
        "this many seconds from now (a repetition is taken to last the budget and a minute)",
    )
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    if not args.tally_only:
        if args.reps < 1:
            parser.error("--reps must be at least 1")
        if not args.pytest_args:
            parser.error("give the selection after --, e.g. -- suites/test_gemm.py")
        deadline = time.monotonic() + args.stop_by if args.stop_by else float("inf")
        for i in range(args.reps):
            if time.monotonic() + parse_budget(args.budget) + 60 > deadline:
                print(f"rep {i}: not started, it would end after --stop-by", flush=True)
                break
            out = args.work / f"rep-{i:02d}"
            cmd = [sys.executable, "-m", "perfsuite", "ab", "--a", sys.executable]
            cmd += ["--b", sys.executable, "--budget", args.budget, "--seed", str(i)]
            cmd += ["--interleave", args.interleave, "--sides", args.sides]
            cmd += ["--samples", str(args.samples)] if args.samples else []
            cmd += ["--sample-seconds", args.sample_seconds] if args.sample_seconds else []
            cmd += [f"--b-env={e}" for e in args.b_env]
            cmd += ["--html", "no", "--output-dir", str(out), "--", *args.pytest_args]
            start = time.strftime("%H:%M:%S", time.gmtime())
            on, off = (float(x) for x in args.burst.split(","))
            with burner(args.burner, (on, off)):
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            (args.work / f"rep-{i:02d}.log").write_text(done.stdout + done.stderr)
            print(f"rep {i}: started {start} UTC, exit {done.returncode}", flush=True)
    tally(args.work)


def tally(work: Path) -> None:
    """One row per repetition, then the totals."""
    records = sorted(work.glob("rep-*/*/ab.json"))
    if not records:
        sys.exit(f"no ab.json under {work}")
    total: Counter[str] = Counter()
    print("| rep | started | rounds | seconds | s per round | " + " | ".join(VERDICTS) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, path in enumerate(records):
        data = json.loads(path.read_text())
        counts = Counter(c["verdict"] for c in data["checks"])
        total.update(counts)
        rounds = len(data["order"])
        per = data["seconds"] / rounds if rounds else float("nan")
        cells = " | ".join(str(counts[v]) for v in VERDICTS)
        print(
            f"| {n} | {data['created'][11:16]} | {rounds} | {data['seconds']:.0f} | {per:.0f} "
            f"| {cells} |"
        )
    n = sum(total.values())
    shares = ", ".join(f"{v} {total[v]} ({100 * total[v] / n:.1f}%)" for v in VERDICTS)
    print(f"\n{len(records)} repetitions, {n} check verdicts: {shares}")


if __name__ == "__main__":
    main()
