"""How good are perfsuite ab's verdicts on this machine?  A benchmark, not a test.

    python -m lab.ab_verdicts AA.json [--replays 200] [--budget 600] [--slowdowns 0.1,0.2]
                                      [--fixed-seconds 5] [--seed 0] [--tolerance 0.02]

Reads the record of an A/A session of ``perfsuite ab`` in which every check ran in every round
(``--min-rounds`` = ``--max-rounds``, the same stack on both sides: nothing changed), and
replays the A/B procedure on it many times, through the product's own round engine
(``perfsuite.ab.rounds.run_rounds``) with a clock that advances by the time each round would
have taken:

* each replay takes the recorded rounds in a random order, without replacement, and swaps
  the two sides of each round at random (in an A/A the labels are arbitrary);
* a slowdown of B is applied as ``-p perfsuite.slowdown`` would: every sample of B falls to
  ``1 - s`` of itself (a rate; a latency grows by ``1 / (1 - s)``);
* a round's time is the recorded time of a side per check times the checks selected, plus
  ``--fixed-seconds`` per side (interpreter, imports: measure it with a side of 1 check).

It prints, for A/A and each slowdown, the share of verdicts "regressed"/"improved", "same" and
"unknown", and the rounds and minutes used, beside three other experiments on the same data
and the same machine time:

* the stored baseline: 5 runs of A, then 1 run of B, judged by ``perfsuite compare``'s
  multi-run test (``perfsuite.judge.compare.compare_runs``);
* asv's default rule and pytest-benchmark's ``min:5%`` on the pooled samples of as many rounds
  as the budget allows without narrowing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.best_of_passes import slowed_record
from lab.verdicts import asv_rule, pytest_benchmark_rule
from perfsuite.ab import rounds
from perfsuite.judge.compare import compare_runs
from perfsuite.judge.family import SampleCheck, judge_samples
from perfsuite.model import RunRecord
from perfsuite.store.records import load_record


class Clock:
    """A clock the replay advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def load(
    path: Path,
) -> tuple[
    list[dict[str, rounds.Reading]], list[dict[str, rounds.Reading]], list[float], list[Path]
]:
    """Per round: A's and B's readings, the mean side seconds per check, A-side records."""
    data = json.loads(path.read_text())
    by_round: dict[int, dict[str, dict]] = {}
    for run in data["rounds"]:
        if not run["failed"]:
            by_round.setdefault(run["round"], {})[run["side"]] = run
    a_rounds, b_rounds, per_check, records = [], [], [], []
    for rnd in sorted(by_round):
        sides = by_round[rnd]
        if set(sides) != {"A", "B"}:
            continue
        pair = []
        for side in ("A", "B"):
            run = sides[side]
            # From the side's own run record: its samples and its noise guard's flags.
            pair.append(rounds.readings_of(load_record(Path(run["record"]))))
            per_check.append(own_seconds(run, data) / max(1, len(run["readings"])))
            records.append(Path(run["record"]))
        a_rounds.append(pair[0])
        b_rounds.append(pair[1])
    common = set.intersection(*(set(r) for r in a_rounds + b_rounds))
    a_rounds = [{c: r[c] for c in common} for r in a_rounds]
    b_rounds = [{c: r[c] for c in common} for r in b_rounds]
    return a_rounds, b_rounds, per_check, records


def own_seconds(run: dict, data: dict) -> float:
    """A side's own time in a round: its process's life less its wait for turns.

    Records of sides in lockstep written before the wait was recorded: half the round, as the
    two sides of a round took turns over the same checks.
    """
    if "waited" in run:
        return float(run["seconds"]) - float(run["waited"])
    if data.get("plan", {}).get("interleave") == "checks":
        return float(run["seconds"]) / 2
    return float(run["seconds"])


def slowed(reading: rounds.Reading, slowdown: float) -> rounds.Reading:
    """The reading as ``-p perfsuite.slowdown`` would have left it."""
    factor = 1 - slowdown if reading.higher_is_better else 1 / (1 - slowdown)
    return replace(reading, samples=tuple(s * factor for s in reading.samples))


def replay(
    a_rounds: Sequence[dict[str, rounds.Reading]],
    b_rounds: Sequence[dict[str, rounds.Reading]],
    slowdown: float,
    plan: rounds.Plan,
    check_s: float,
    fixed_s: float,
    rng: random.Random,
) -> rounds.Session:
    """One A/B session replayed on the recorded rounds."""
    order = list(range(len(a_rounds)))
    rng.shuffle(order)
    swaps = [rng.random() < 0.5 for _ in order]
    clock = Clock()
    n_checks = len(a_rounds[0])

    def run_side(
        side: str, rnd: int, position: int, selection: Sequence[str] | None
    ) -> rounds.SideRun:
        i = order[(rnd - 1) % len(order)]
        a, b = (b_rounds[i], a_rounds[i]) if swaps[i] else (a_rounds[i], b_rounds[i])
        readings = (
            a if side == "A" else {c: slowed(r, slowdown) if slowdown else r for c, r in b.items()}
        )
        if selection is not None:
            readings = {c: r for c, r in readings.items() if c in set(selection)}
        n = len(selection) if selection is not None else n_checks
        seconds = fixed_s + check_s * n
        clock.now += seconds
        return rounds.SideRun(rnd, side, position, seconds, 0, "", readings)

    return rounds.run_rounds(rounds.one_then_the_other(run_side), plan, clock=clock)


_LOADED: dict[Path, RunRecord] = {}


def loaded_records(paths: Sequence[Path]) -> list[RunRecord]:
    """The side runs' records, each read once."""
    for p in paths:
        if p not in _LOADED:
            _LOADED[p] = load_record(p)
    return [_LOADED[p] for p in paths]


def materiality(
    loaded: list[RunRecord], slowdowns: Sequence[float], rng: random.Random, replays: int
) -> None:
    """The stored-baseline verdict with and without its materiality rule, same comparisons.

    With the rule (``judge_samples``), a shift no larger than the baseline's own run-to-run
    spread is not a regression; without it, a significant shift beyond the tolerance is.
    Both use the two-level test, the prior fitted across checks and BH over the family.
    """
    if len(loaded) < 6:
        return
    print("| stored baseline, 5 runs then 1 | slowdown | regressed with the rule | without |")
    print("|---|---|---|---|")
    for s in slowdowns:
        with_rule, without, total = 0, 0, 0
        for _ in range(replays):
            picked = rng.sample(range(len(loaded)), 6)
            before = [{r.id: r for r in loaded[i].results} for i in picked[:5]]
            after = slowed_record(loaded[picked[5]], s) if s else loaded[picked[5]]
            family = [
                (r, [run[r.id].samples for run in before])
                for r in after.results
                if all(r.id in run for run in before)
            ]
            tolerances = [r.baseline.tolerance or 0.05 for r, _ in family]
            judged = judge_samples(
                [
                    SampleCheck(r.samples, runs, r.higher_is_better, tol)
                    for (r, runs), tol in zip(family, tolerances, strict=True)
                ]
            )
            for (r, _), tol, (c, decision, sig) in zip(family, tolerances, judged, strict=True):
                total += 1
                with_rule += decision.verdict == "regressed"
                worse = c.ratio < 1 if r.higher_is_better else c.ratio > 1
                beyond = abs(math.log(c.ratio)) > -math.log1p(-tol)
                without += bool(sig and worse and beyond and not c.few_samples)
        print(f"| | {s:.0%} | {with_rule / total:.1%} | {without / total:.1%} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--slowdowns", default="0.1,0.2")
    parser.add_argument("--fixed-seconds", type=float, default=5.0)
    parser.add_argument("--min-rounds", type=int, default=3)
    parser.add_argument(
        "--tolerance", type=float, default=None, help="as perfsuite ab's (default: each check's)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stored-replays", type=int, default=60)
    parser.add_argument("--skip-others", action="store_true", help="only perfsuite ab's rows")
    parser.add_argument(
        "--materiality-only", action="store_true", help="only the stored baseline's rule study"
    )
    args = parser.parse_args()
    a_rounds, b_rounds, per_check, records = load(args.record)
    if args.materiality_only:
        slows = [0.0] + [float(x) for x in args.slowdowns.split(",") if x]
        materiality(loaded_records(records), slows, random.Random(args.seed), args.stored_replays)
        return
    if len(a_rounds) < args.min_rounds + 1:
        raise SystemExit(f"{args.record}: {len(a_rounds)} complete rounds; record more")
    check_s = sum(per_check) / len(per_check) - args.fixed_seconds / len(a_rounds[0])
    cap = len(a_rounds)
    plan = rounds.Plan(
        min_rounds=args.min_rounds, max_rounds=cap, budget_s=args.budget, tolerance=args.tolerance
    )
    n_checks = len(a_rounds[0])
    full_round = 2 * (args.fixed_seconds + check_s * n_checks)
    plain_rounds = max(1, min(cap, int(args.budget // full_round)))
    print(
        f"{args.record}: {len(a_rounds)} rounds of {n_checks} checks; a full round "
        f"~{full_round:.0f} s; budget {args.budget:.0f} s; rounds without narrowing: {plain_rounds}"
    )
    rng = random.Random(args.seed)
    slowdowns = [0.0] + [float(s) for s in args.slowdowns.split(",") if s]
    print(
        "| experiment | slowdown | regressed | improved | same | unknown "
        "| rounds (mean, max) | minutes (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    per_check: dict[float, Counter[str]] = {}
    for s in slowdowns:
        tally: Counter[str] = Counter()
        per_check[s] = Counter()
        used, minutes = [], []
        for _ in range(args.replays):
            session = replay(a_rounds, b_rounds, s, plan, check_s, args.fixed_seconds, rng)
            tally.update(rounds.verdict(st) for st in session.states.values())
            per_check[s].update(
                c for c, st in session.states.items() if rounds.verdict(st) == "regressed"
            )
            used.append(len(session.order))
            minutes.append(session.seconds / 60)
        total = sum(tally.values())
        print(
            f"| perfsuite ab | {s:.0%} | {tally['regressed'] / total:.1%} | "
            f"{tally['improved'] / total:.1%} | {tally['same'] / total:.1%} | "
            f"{tally['unknown'] / total:.1%} | {sum(used) / len(used):.1f}, {max(used)} | "
            f"{sum(minutes) / len(minutes):.1f} |"
        )
    # The checks with the least power, and their round-to-round spread in the A/A itself.
    pairs = zip(a_rounds, b_rounds, strict=True)
    runs = [
        rounds.SideRun(i + 1, side, 0, 0.0, 0, "", r)
        for i, pair in enumerate(pairs)
        for side, r in zip("AB", pair, strict=True)
    ]
    clean = rounds.evidence(runs)

    def sd(check: str) -> float:
        lr = clean[check].log_ratios
        return statistics.stdev(lr) if len(lr) > 1 else float("nan")

    at = slowdowns[1]
    worst = sorted(a_rounds[0], key=lambda c: per_check[at][c])[:12]
    print(f"\nleast power at {at:.0%}: power, sd of the A/A's round log ratios, clean rounds")
    for c in worst:
        power = per_check[at][c] / args.replays
        n = len(clean[c].log_ratios)
        print(f"  {c.split('::')[-1]}: {power:.0%}, sd {sd(c):.1%}, {n} rounds")
    sds = sorted(sd(c) for c in clean if len(clean[c].log_ratios) > 1)
    q = len(sds) // 4
    print(
        f"round-to-round sd of log B/A over {len(sds)} checks: median {sds[2 * q]:.1%}, "
        f"quartiles {sds[q]:.1%} .. {sds[3 * q]:.1%}, max {sds[-1]:.1%}"
    )
    # What 95% power at the first slowdown needs, per check, with the family all shifted (so
    # Benjamini-Hochberg's threshold approaches alpha = 0.05): n = ((z(0.975) + z(0.95)) sd /
    # delta)^2 rounds (normal approximation), and the time a round of that one check costs.
    delta = -math.log1p(-at)
    one_check_round = 2 * (args.fixed_seconds + check_s)
    needs = sorted(
        (((1.959964 + 1.644854) * sd(c) / delta) ** 2, c)
        for c in clean
        if len(clean[c].log_ratios) > 1
    )
    over = [(n, c) for n, c in needs if n * one_check_round > args.budget]
    print(
        f"rounds for 95% power at {at:.0%}: median {needs[len(needs) // 2][0]:.0f}, max "
        f"{needs[-1][0]:.0f}; {len(over)} checks need more than the budget even alone "
        f"({one_check_round:.0f} s a round): "
        + ", ".join(f"{c.split('::')[-1]} ({n:.0f})" for n, c in over[-6:])
    )
    left_out = sum(len(st.tainted) for st in clean.values())
    print(f"check-rounds left out as measured under foreign load: {left_out}\n")
    if args.skip_others:
        return
    # asv and pytest-benchmark on the pooled samples of the rounds the budget allows.
    for name, rule in (
        ("asv (1.1 and MWU)", asv_rule),
        ("pytest-benchmark min:5%", pytest_benchmark_rule),
    ):
        for s in slowdowns:
            tally = Counter()
            for _ in range(args.replays):
                picked = rng.sample(range(len(a_rounds)), plain_rounds)
                for c in a_rounds[0]:
                    base, cur = [], []
                    for i in picked:
                        a, b = (
                            (b_rounds[i], a_rounds[i])
                            if rng.random() < 0.5
                            else (a_rounds[i], b_rounds[i])
                        )
                        base += a[c].samples
                        cur += (slowed(b[c], s) if s else b[c]).samples
                    tally[rule(cur, base, a_rounds[0][c].higher_is_better)] += 1
            total = sum(tally.values())
            print(
                f"| {name}, {plain_rounds} rounds pooled | {s:.0%} | "
                f"{tally['regressed'] / total:.1%} | "
                f"{tally['improved'] / total:.1%} | - | - | {plain_rounds} | - |"
            )
    materiality(loaded_records(records), slowdowns, rng, args.stored_replays)
    # The stored baseline: 5 runs of one side, then one run, perfsuite compare's test.
    loaded = loaded_records(records)
    if len(loaded) >= 6:
        for s in slowdowns:
            tally = Counter()
            for _ in range(args.stored_replays):
                picked = rng.sample(range(len(loaded)), 6)
                before = [loaded[i] for i in picked[:5]]
                after = loaded[picked[5]]
                after = slowed_record(after, s) if s else after
                rows, _, _ = compare_runs(before, after, window_s=0)
                tally.update(row.verdict for row in rows)
            total = sum(tally.values())
            print(
                f"| stored baseline: 5 runs, then 1 | {s:.0%} | {tally['regressed'] / total:.1%} | "
                f"{tally['improved'] / total:.1%} | {tally['ok'] / total:.1%} (ok) | "
                f"{tally['noisy'] / total:.1%} (noisy) | 6 runs | {6 * full_round / 2 / 60:.1f} |"
            )


if __name__ == "__main__":
    main()
