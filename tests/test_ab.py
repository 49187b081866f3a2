"""perfsuite ab: the paired statistics, the round engine on a fake side, stacks, bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from packaging.version import Version
from scipy import stats as sps
from toy_checks import copy_check

from perfsuite import cli
from perfsuite.ab import (
    CheckVerdict,
    Outcome,
    bisect,
    broken_by_b,
    decide_exit,
    gather,
    lockstep,
    paired,
    rounds,
    stacks,
)
from perfsuite.ab import run as ab_run
from perfsuite.ab import side as side_plugin
from perfsuite.ab.run import parse_budget, parse_env
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome
from perfsuite.report import ab as report_ab

# ---------------------------------------------------------------- paired statistics


def test_the_paired_t_matches_scipy() -> None:
    x = [0.02, -0.01, 0.05, 0.03, 0.00, 0.04]
    got = paired.summarize(x)
    want = sps.ttest_1samp(x, 0.0)
    ci = want.confidence_interval(0.95)
    assert got.p == pytest.approx(want.pvalue)
    assert (got.low, got.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert got.ratio == pytest.approx(math.exp(np.mean(x)))


def test_one_round_is_no_test_and_identical_rounds_are_exact() -> None:
    one = paired.summarize([0.1])
    assert one.p == 1.0 and one.low == -math.inf and paired.ruled_out(one) == math.inf
    same = paired.summarize([0.0, 0.0, 0.0])
    assert same.p == 1.0 and same.low == same.high == 0.0
    shifted = paired.summarize([-0.2, -0.2, -0.2])
    assert shifted.p < 1e-10


@pytest.mark.parametrize(
    ("logs", "hib", "significant", "expected"),
    [
        ([-0.22, -0.20, -0.25, -0.21, -0.23, -0.2], True, True, "regressed"),  # a rate fell 20%
        ([-0.22, -0.20, -0.25, -0.21, -0.23, -0.2], False, True, "improved"),  # a latency fell
        ([0.22, 0.20, 0.25, 0.21, 0.23, 0.2], True, True, "improved"),
        ([-0.22, -0.20, -0.25, -0.21, -0.23, -0.2], True, False, "unknown"),  # not significant
        ([-0.22, -0.20, -0.25, -0.21], True, True, "unknown"),  # 4 rounds: the signs cannot tell
        ([-0.03, -0.02, -0.035, -0.025], True, True, "same"),  # significant, inside 5%
        ([0.001, -0.002, 0.0015, -0.001], True, False, "same"),  # CI inside +-5%
        ([0.1, -0.1, 0.12, -0.09], True, False, "unknown"),  # wide: neither
    ],
)
def test_the_four_verdicts(logs: list[float], hib: bool, significant: bool, expected: str) -> None:
    pairs = paired.summarize(logs)
    assert paired.verdict_of(pairs, hib, 0.05, significant) == expected


def test_the_family_is_corrected_and_undecided_checks_say_what_they_need() -> None:
    rng = np.random.default_rng(1)
    slow = paired.summarize(list(-0.2 + 0.02 * rng.standard_normal(6)))
    wide = paired.summarize([0.08, -0.09, 0.07, -0.06])
    # Alone, p = 0.01 passes 0.05; in a family of 20 other checks at p = 1 BH needs 0.0025.
    borderline = paired.summarize([-0.10, -0.14, -0.08, -0.13])
    alone = paired.judge_family([(borderline, True, 0.05)])
    assert alone[0].significant
    family = paired.judge_family([(borderline, True, 0.05)] + [(wide, True, 0.05)] * 20)
    assert not family[0].significant and family[0].verdict == "unknown"
    assert family[0].rounds_needed is not None and family[0].rounds_needed > borderline.n
    judged = paired.judge_family([(slow, True, 0.05), (wide, True, 0.05)])
    assert [j.verdict for j in judged] == ["regressed", "unknown"]
    assert judged[1].ruled_out > 0.05 and judged[0].rounds_needed is None


def test_the_sign_flip_test_is_exact() -> None:
    assert paired.sign_flip_p([-0.48, -0.52, -0.48]) == 0.25  # 2 of 8 patterns as far
    assert paired.sign_flip_p([-0.1] * 6) == 2 / 64
    assert paired.sign_flip_p([-0.1] * 5) == 2 / 32
    assert paired.sign_flip_p([0.1, -0.1, 0.2, -0.05]) == 0.75
    assert paired.sign_flip_p([-0.1] * 20) < 1e-4  # past EXACT_SIGNS: seeded draws
    assert paired.MIN_SIGN_ROUNDS == 5
    # Three rounds that agree closely pass the t-test, not the sign-flip test.
    three = paired.summarize([-0.48, -0.52, -0.48])
    assert three.p < 0.01 and three.p_signs == 0.25


def test_bimodal_rounds_in_an_a_a_are_no_regression() -> None:
    """A STREAM-like check: each round's ratio is 1, 0.6 or 1/0.6, whichever plateau each side met.

    Nothing changed, so every regressed or improved is a false alarm. Judged after 3 to 8
    rounds in a family of 51 checks, 12 of them bimodal, as perfsuite ab judges them.
    """
    rng = np.random.default_rng(7)
    jump = math.log(1 / 0.6)

    def check_rounds(n: int, bimodal: bool) -> list[float]:
        steps = rng.choice([0.0, -jump, jump], p=[0.5, 0.25, 0.25], size=n) if bimodal else 0
        return list(steps + 0.02 * rng.standard_normal(n))

    alarms = trials = 0
    for _ in range(100):  # 30,600 verdicts
        for n in range(3, 9):
            family = [(paired.summarize(check_rounds(n, i < 12)), True, 0.05) for i in range(51)]
            judged = paired.judge_family(family)
            alarms += sum(j.verdict in ("regressed", "improved") for j in judged)
            trials += len(judged)
    assert alarms / trials < 0.001, (alarms, trials)
    # The t-test alone called some of them: this is what the sign-flip test is for.
    three = [paired.summarize([-jump, -jump + 0.01, -jump - 0.01])] + [
        paired.summarize(list(0.02 * rng.standard_normal(3))) for _ in range(50)
    ]
    assert paired.family.correct([p.p for p in three], 0.05, 51, "fdr")[0]


def test_a_change_on_the_tolerance_may_never_be_decided() -> None:
    limit = paired.band(0.05)
    edge = paired.summarize([-limit - 0.01, -limit + 0.01, -limit - 0.005, -limit + 0.005])
    assert paired.rounds_needed(edge, 0.05, 0.05, cap=50) is None


def test_the_band_rejects_a_tolerance_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        paired.band(1.5)


# ---------------------------------------------------------------- rounds on a fake side


def test_the_order_is_balanced_in_blocks_of_two() -> None:
    got = [o for _, o in zip(range(40), rounds.orders(seed=3), strict=False)]
    for i in range(0, 40, 2):
        assert got[i] == tuple(reversed(got[i + 1]))
    firsts = [o[0] for o in got]
    assert firsts.count("A") == firsts.count("B") == 20
    assert len({got[i] for i in range(0, 40, 2)}) == 2  # both block orders occur


def _turns(broker: lockstep.Broker, script: Sequence[tuple[str, ...]]) -> list[str]:
    """Feed the broker what the sides say; the turns it hands out, as "side:check"."""
    out = []
    for side, word, *check in script:
        getattr(broker, word)(side, *check)
        while side_to_go := broker.next():
            out.append(f"{side_to_go}:{broker.granted[-1][1]}")
    return out


def _both_run(
    checks: Sequence[str],
    order: tuple[str, str],
    b_checks: Sequence[str] | None = None,
    broker: lockstep.Broker | None = None,
) -> list[str]:
    """Two sides that run ``checks`` (B: ``b_checks`` if given), asking as soon as they may."""
    broker = broker or lockstep.Broker(order)
    b_checks = checks if b_checks is None else b_checks
    left = {"A": list(checks[1:]), "B": list(b_checks[1:])}
    turns = _turns(broker, [("A", "want", checks[0]), ("B", "want", b_checks[0])])
    while broker.holder:
        side = broker.holder
        if left[side]:
            turns += _turns(broker, [(side, "release"), (side, "want", left[side].pop(0))])
        else:
            turns += _turns(broker, [(side, "exited")])
    return turns


def test_lockstep_turns_pair_each_check_in_alternating_order() -> None:
    turns = _both_run(["c1", "c2", "c3", "c4"], ("B", "A"))
    assert turns == [
        "B:c1", "A:c1", "A:c2", "B:c2", "B:c3", "A:c3", "A:c4", "B:c4",
    ]  # fmt: skip


def test_lockstep_samples_alternate_within_a_check_and_checks_alternate_with_even_counts() -> None:
    turns = _both_run(["c1", "c1#2", "c2", "c2#2"], ("A", "B"))
    assert turns == [
        "A:c1", "B:c1", "B:c1#2", "A:c1#2", "B:c2", "A:c2", "A:c2#2", "B:c2#2",
    ]  # fmt: skip


def test_lockstep_a_side_that_left_a_check_early_waits_until_the_other_has_finished_it() -> None:
    """A skipped c1 after its first turn: B takes its other samples, then c2 pairs again."""
    turns = _both_run(
        ["c1", "c2", "c2#2", "c2#3"], ("A", "B"), ["c1", "c1#2", "c1#3", "c2", "c2#2", "c2#3"]
    )
    assert turns == [
        "A:c1", "B:c1", "B:c1#2", "B:c1#3",
        "B:c2", "A:c2", "A:c2#2", "B:c2#2", "B:c2#3", "A:c2#3",
    ]  # fmt: skip


def test_lockstep_names_the_checks_whose_samples_ran_in_turn_pairs() -> None:
    broker = lockstep.Broker(("A", "B"))
    _both_run(["c1", "c1#2", "c1#3", "c2", "c3", "c3#2"], ("A", "B"), broker=broker)
    assert broker.turn_pairs() == ("c1", "c3")  # c2: one turn each, its samples back to back
    # A left c1 after its first turn: B took c1's other samples alone; c2 paired again.
    broker = lockstep.Broker(("A", "B"))
    _both_run(
        ["c1", "c2", "c2#2", "c2#3"],
        ("A", "B"),
        ["c1", "c1#2", "c1#3", "c2", "c2#2", "c2#3"],
        broker=broker,
    )
    assert broker.turn_pairs() == ("c2",)
    # A check only A selected: c1's turns still pair, but later checks fall out of step
    # (B runs c2 while A is on c1#2), and those are not paired by turns.
    broker = lockstep.Broker(("A", "B"))
    _both_run(["x", "c1", "c1#2"], ("A", "B"), ["c1", "c1#2"], broker=broker)
    assert broker.turn_pairs() == ("c1",)
    broker = lockstep.Broker(("A", "B"))
    _both_run(
        ["x", "c1", "c1#2", "c2", "c2#2"], ("A", "B"), ["c1", "c1#2", "c2", "c2#2"], broker=broker
    )
    assert broker.turn_pairs() == ()


def test_lockstep_waits_for_a_side_still_starting_and_frees_the_turn_when_one_ends() -> None:
    broker = lockstep.Broker(("A", "B"))
    assert _turns(broker, [("A", "want", "c1")]) == []  # B still starting: nobody measures
    assert _turns(broker, [("B", "want", "c1")]) == ["A:c1"]
    assert _turns(broker, [("B", "exited")]) == []  # A holds the turn
    assert _turns(broker, [("A", "release"), ("A", "want", "c2")]) == ["A:c2"]


def test_lockstep_lets_the_side_behind_go_when_selections_differ() -> None:
    broker = lockstep.Broker(("A", "B"))
    turns = _turns(broker, [("A", "want", "only-a"), ("B", "want", "c1")])
    assert turns == ["A:only-a"]  # equal counts: the round's first side
    turns = _turns(broker, [("A", "release"), ("A", "want", "c1")])
    assert turns == ["A:c1"]  # both ask for c1: the pair's first side
    turns = _turns(broker, [("A", "release"), ("A", "want", "c2")])
    assert turns == ["B:c1"]  # A asks for c2 after 2 checks, B for c1 after none


class FakeSides:
    """Sides whose checks read a value times a per-round drift, B slowed by ``slowdown``."""

    def __init__(
        self,
        checks: dict[str, float],
        slowdown: float = 0.0,
        noise: float = 0.01,
        seed: int = 0,
        fail: set[tuple[int, str]] | None = None,
        interrupt_at: int | None = None,
    ) -> None:
        self.checks = checks
        self.slowdown = slowdown
        self.noise = noise
        self.rng = random.Random(seed)
        self.fail = fail or set()
        self.interrupt_at = interrupt_at
        self.calls: list[tuple[str, int, int, tuple[str, ...] | None]] = []
        self.drift: dict[int, float] = {}
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(
        self, side: str, rnd: int, position: int, selection: Sequence[str] | None
    ) -> rounds.SideRun:
        if self.interrupt_at == rnd and position == 1:
            raise KeyboardInterrupt
        self.calls.append(
            (side, rnd, position, tuple(selection) if selection is not None else None)
        )
        chosen = list(self.checks) if selection is None else list(selection)
        self.now += 10.0 + len(chosen)
        if (rnd, side) in self.fail:
            return rounds.SideRun(rnd, side, position, 1.0, 1, "exited 1 without a run record")
        # The machine drifts by up to 30% from round to round: the pairing cancels it.
        drift = self.drift.setdefault(rnd, math.exp(self.rng.uniform(-0.3, 0.3)))
        readings = {}
        for check in chosen:
            value = self.checks[check] * drift * (1 - self.slowdown if side == "B" else 1.0)
            samples = tuple(value * math.exp(self.rng.gauss(0, self.noise)) for _ in range(3))
            readings[check] = rounds.Reading("GB/s", True, 0.05, samples, "pass")
        return rounds.SideRun(rnd, side, position, 1.0, 0, "", readings)


CHECKS = {f"suites/test_x.py::test_x[{i}]": 10.0 + i for i in range(6)}


def test_an_a_a_under_drift_is_same_and_stops_once_decided() -> None:
    sides = FakeSides(CHECKS)
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides),
        rounds.Plan(min_rounds=3, max_rounds=10),
        clock=sides.clock,
    )
    assert session.stopped == "decided"
    assert 3 <= len(session.order) <= 5
    assert {rounds.verdict(s) for s in session.states.values()} == {"same"}


def test_a_slowdown_under_drift_is_found_and_the_selection_narrows() -> None:
    checks = dict(CHECKS)
    sides = FakeSides(checks, slowdown=0.2, noise=0.02, seed=5)
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides),
        rounds.Plan(min_rounds=3, max_rounds=12),
        clock=sides.clock,
    )
    verdicts = {rounds.verdict(s) for s in session.states.values()}
    assert verdicts == {"regressed"}
    # Rounds past the minimum ran only what was undecided (possibly nothing: it stopped); no
    # change is called before the sign-flip test can pass, so the first to narrow follows it.
    for _, rnd, _, selection in sides.calls:
        if rnd <= 3:
            assert selection is None
        elif rnd > paired.MIN_SIGN_ROUNDS:
            assert selection is not None and len(selection) < len(checks)


def test_the_budget_stops_the_rounds_before_one_would_overrun() -> None:
    sides = FakeSides(CHECKS, noise=0.3)  # too noisy to decide
    plan = rounds.Plan(min_rounds=3, max_rounds=50, budget_s=200.0)
    session = rounds.run_rounds(rounds.one_then_the_other(sides), plan, clock=sides.clock)
    assert session.stopped == "budget"
    assert sides.now <= 200.0


def test_a_failed_side_gives_no_evidence_for_its_round() -> None:
    sides = FakeSides(CHECKS, fail={(2, "B")})
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides), rounds.Plan(min_rounds=3, max_rounds=3), clock=sides.clock
    )
    state = next(iter(session.states.values()))
    assert state.rounds == (1, 3)
    assert [r.failed for r in session.runs if r.round == 2 and r.side == "B"] != [""]


def test_sides_that_always_fail_stop_after_the_minimum_with_nothing_compared() -> None:
    sides = FakeSides(CHECKS, fail={(r, s) for r in range(1, 20) for s in "AB"})
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides),
        rounds.Plan(min_rounds=3, max_rounds=10),
        clock=sides.clock,
    )
    assert session.stopped == "nothing compared" and len(session.order) == 3
    checks, _, _ = gather(session.states, session.runs)
    assert (
        decide_exit(checks, session.incomplete, frozenset({"regressed"}))
        == outcome.EXIT_INCONCLUSIVE
    )


def test_an_interrupt_keeps_the_rounds_so_far_and_marks_the_session_incomplete() -> None:
    sides = FakeSides(CHECKS, interrupt_at=3)
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides), rounds.Plan(min_rounds=3, max_rounds=5), clock=sides.clock
    )
    assert session.stopped == "interrupted"
    assert session.incomplete == "interrupted during round 3"
    assert len(next(iter(session.states.values())).log_ratios) == 2
    checks, _, _ = gather(session.states, session.runs)
    assert (
        decide_exit(checks, session.incomplete, frozenset({"regressed"}))
        == outcome.EXIT_INTERRUPTED
    )


def _loaded_run(
    rnd: int, side: str, value: float, load: float = 0.0, states: tuple[str, ...] = ()
) -> rounds.SideRun:
    flags = ("foreign-load",) if load > 0.25 else ()
    reading = rounds.Reading("GB/s", True, 0.05, (value,) * 3, "pass", flags, load, states)
    return rounds.SideRun(rnd, side, 0, 1.0, 0, "", {"c": reading})


def test_a_load_both_readings_shared_is_kept_and_recorded() -> None:
    runs = []
    for rnd in range(1, 9):  # a burner beside both sides: B 20% slower all the same
        runs += [_loaded_run(rnd, "A", 10.0 + rnd * 0.01, 0.95), _loaded_run(rnd, "B", 8.0, 0.97)]
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    assert states["c"].rounds == tuple(range(1, 9)) and states["c"].tainted == ()
    assert states["c"].loads == pytest.approx((0.96,) * 8)
    assert rounds.verdict(states["c"]) == "regressed"
    (check,), _, _ = gather(states, runs)
    assert "8 of 8 rounds under a shared load (0.96 cores)" in report_ab.note(check)


def test_turn_pairs_cancel_a_burst_that_split_the_sides_medians() -> None:
    # A burst halved A's samples 2 and 3 and B's sample 3: B is 10% slower in every turn
    # pair it shared, and the pair it split (sample 2) is the median's outlier.
    a = rounds.Reading("GB/s", True, 0.05, (10.0, 5.0, 5.0), "pass")
    b = rounds.Reading("GB/s", True, 0.05, (9.0, 9.0, 4.5), "pass")
    assert rounds.round_value(a, b, by_turns=True) == pytest.approx(math.log(0.9))
    assert rounds.round_value(a, b) == pytest.approx(math.log(9.0 / 5.0))  # the medians

    def runs_of(turn_pairs: tuple[str, ...]) -> list[rounds.SideRun]:
        runs = []
        for rnd in range(1, 7):
            k = 1 + rnd / 1000  # rounds differ a little
            b_k = rounds.Reading("GB/s", True, 0.05, tuple(x * k for x in b.samples), "pass")
            for side, r in (("A", a), ("B", b_k)):
                runs.append(
                    rounds.SideRun(rnd, side, 0, 1.0, 0, "", {"c": r}, turn_pairs=turn_pairs)
                )
        return runs

    states = rounds.judge(rounds.evidence(runs_of(("c",))), rounds.Plan())
    assert states["c"].log_ratios == pytest.approx(
        [math.log(0.9 * (1 + r / 1000)) for r in range(1, 7)]
    )
    assert states["c"].by_turns == tuple(range(1, 7))
    assert rounds.verdict(states["c"]) == "regressed"
    (check,), _, _ = gather(states, runs_of(("c",)))
    assert check.to_dict()["turn_pair_rounds"] == list(range(1, 7))
    # Where the sides did not take the check turn by turn, the medians judge it.
    states = rounds.judge(rounds.evidence(runs_of(())), rounds.Plan())
    assert states["c"].by_turns == () and rounds.verdict(states["c"]) == "improved"


def test_turn_pairs_need_as_many_positive_samples_on_both_sides() -> None:
    a = rounds.Reading("ms", False, 0.05, (2.0, 2.0), "pass")
    b = rounds.Reading("ms", False, 0.05, (2.2, 2.2, 50.0), "pass")
    assert not rounds.pairable(a, b)
    assert rounds.round_value(a, b, by_turns=True) == pytest.approx(math.log(2.2 / 2.0))
    zero = rounds.Reading("ms", False, 0.05, (0.0, 2.0, 2.0), "pass")
    c = rounds.Reading("ms", False, 0.05, (4.0, 4.0, 4.0), "pass")
    assert not rounds.pairable(zero, c)
    assert rounds.round_value(zero, c, by_turns=True) == pytest.approx(math.log(2.0))
    one = rounds.Reading("ms", False, 0.05, (2.0,), "pass")
    assert not rounds.pairable(one, one)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_a_rounds_turn_pair_value_changes_sign_when_the_sides_swap(n: int) -> None:
    rng = random.Random(n)
    a = rounds.Reading("GB/s", True, 0.05, tuple(rng.uniform(1, 2) for _ in range(n)), "pass")
    b = rounds.Reading("GB/s", True, 0.05, tuple(rng.uniform(1, 2) for _ in range(n)), "pass")
    assert rounds.round_value(a, b, True) == pytest.approx(-rounds.round_value(b, a, True))


def test_a_pair_whose_load_started_or_stopped_between_its_readings_is_left_out() -> None:
    runs = []
    for rnd in (1, 2, 3):  # B 20x slower, but only ever while a load came and went
        runs += [_loaded_run(rnd, "A", 10.0, 0.02), _loaded_run(rnd, "B", 0.5, 0.99)]
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    assert states["c"].tainted == (1, 2, 3) and states["c"].log_ratios == ()
    assert states["c"].left_out == (rounds.LOAD_CHANGED,) * 3
    assert rounds.verdict(states["c"]) == "unknown"
    runs += [_loaded_run(4, "A", 10.0), _loaded_run(4, "B", 10.1)]
    runs += [_loaded_run(5, "A", 10.0, 0.6), _loaded_run(5, "B", 9.9, 0.7)]
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    assert states["c"].rounds == (4, 5) and rounds.verdict(states["c"]) != "regressed"
    (check,), _, _ = gather(states, runs)
    words = "3 rounds left out: the load changed between A's and B's readings (3)"
    assert words in report_ab.note(check)


def test_a_throttled_gpu_or_an_unrecorded_load_leaves_the_pair_out() -> None:
    gpu = ("gpu-throttled",)
    a = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass", ("throttled",), 0.0, gpu)
    b = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass", ("throttled",), 0.0, gpu)
    assert rounds.unshared(a, b) == "gpu-throttled"
    loaded = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass", ("under load",), None)
    quiet = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass")
    assert rounds.unshared(loaded, quiet) == rounds.LOAD_UNKNOWN
    assert rounds.unshared(quiet, quiet) == ""


def test_a_plan_that_cannot_judge_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        rounds.Plan(min_rounds=1)
    with pytest.raises(ValueError, match="cap"):
        rounds.Plan(min_rounds=5, max_rounds=3)


def _verdict(name: str, below: bool = False) -> CheckVerdict:
    return CheckVerdict("c", "GB/s", True, 0.05, (1, 2), (0.0, 0.0), None, name, below)


@pytest.mark.parametrize(
    ("verdicts", "incomplete", "status"),
    [
        (["same", "same"], "", outcome.EXIT_OK),
        (["same", "improved"], "", outcome.EXIT_OK),
        (["same", "regressed"], "", outcome.EXIT_REGRESSED),
        (["unknown", "regressed"], "", outcome.EXIT_REGRESSED),
        (["same", "unknown"], "", outcome.EXIT_INCONCLUSIVE),
        (["same"], "interrupted during round 2", outcome.EXIT_INTERRUPTED),
        ([], "", outcome.EXIT_INCONCLUSIVE),
    ],
)
def test_the_exit_status(verdicts: list[str], incomplete: str, status: int) -> None:
    checks = [_verdict(v) for v in verdicts]
    assert decide_exit(checks, incomplete, frozenset({"regressed"})) == status


def test_a_regression_on_a_node_below_its_floors_is_not_a_software_verdict() -> None:
    assert (
        decide_exit([_verdict("regressed", below=True)], "", frozenset({"regressed"}))
        == outcome.EXIT_INCONCLUSIVE
    )


def test_floors_missed_on_both_sides_mark_the_node_unhealthy() -> None:
    def run(rnd: int, side: str, floor: str) -> rounds.SideRun:
        reading = rounds.Reading("GB/s", True, 0.05, (1.0, 1.0, 1.0), floor)
        return rounds.SideRun(rnd, side, 0, 1.0, 1, "", {"c": reading, "d": reading})

    runs = [run(1, "A", "fail"), run(1, "B", "fail"), run(2, "A", "fail"), run(2, "B", "pass")]
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    _, _, unhealthy = gather(states, runs)
    assert unhealthy == ()  # B passed half its rounds
    runs[-1] = run(2, "B", "fail")
    _, _, unhealthy = gather(rounds.judge(rounds.evidence(runs), rounds.Plan()), runs)
    assert unhealthy == ("c", "d")


# ---------------------------------------------------------------- stacks and bad input


def test_a_requirement_set_is_told_from_a_path_and_from_nonsense() -> None:
    assert stacks.requirements_of("tensorflow-cpu==2.20.* numpy<2") == (
        "tensorflow-cpu==2.20.*",
        "numpy<2",
    )
    assert stacks.requirements_of("not a ==requirement!") is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty stack spec"),
        ("./no-such-venv", "no such interpreter"),
        ("==2.0", "unknown stack spec"),
        ("tox:", "name a tox environment"),
    ],
)
def test_a_bad_stack_spec_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(PerfsuiteError, match=message):
        stacks.resolve(spec)


def test_a_folder_that_is_no_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PerfsuiteError, match="neither a Python interpreter"):
        stacks.resolve(str(tmp_path))


def _fake_run(returncode: int, output: str = "") -> stacks.Runner:
    def run(cmd: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(cmd), returncode, output, "")

    return run


def test_an_interpreter_without_perfsuite_says_how_to_add_it() -> None:
    with pytest.raises(
        PerfsuiteError, match=r"has no perfsuite .*; add it with: .* -m pip install"
    ):
        stacks.resolve(sys.executable, run=_fake_run(1))


def _make_venv(cmd: Sequence[str]) -> None:
    """What a ``venv`` step of a build leaves, for a fake runner: the interpreter's path."""
    if "venv" in cmd:
        (Path(cmd[-1]) / "bin").mkdir(parents=True)
        (Path(cmd[-1]) / "bin" / "python").write_text("")


def test_a_built_environment_is_reused_and_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def run(cmd: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        _make_venv(cmd)
        return subprocess.CompletedProcess(list(cmd), 0, "", "")

    python, cached, _ = stacks.build_environment(["numpy==1.26.4"], tmp_path, run)
    assert not cached and python.is_file()
    again, cached, _ = stacks.build_environment(["numpy==1.26.4"], tmp_path, run)
    assert cached and again == python
    n = len(calls)
    with pytest.raises(PerfsuiteError, match="could not build an environment with nope==1"):
        stacks.build_environment(
            ["nope==1"],
            tmp_path,
            lambda cmd, **kw: (
                run(cmd)
                if "venv" in cmd
                else subprocess.CompletedProcess(
                    list(cmd), 1, "", "ERROR: No matching distribution found for nope==1"
                )
            ),
        )
    assert len(calls) > n
    assert sorted(p.name for p in (tmp_path / "envs").iterdir()) == [python.parents[1].name]


@pytest.mark.parametrize(
    ("config", "env", "strategy"),
    [
        ("global.extra-index-url='file:///a/simple file:///b/simple'", {}, "unsafe-best-match"),
        ("global.extra-index-url='file:///a/simple'", {"UV_INDEX_STRATEGY": "first-index"}, None),
        ("global.find-links='/opt/wheels'", {}, None),
    ],
)
def test_uv_takes_a_release_from_any_of_pips_indexes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    env: dict[str, str],
    strategy: str | None,
) -> None:
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("UV_INDEX_STRATEGY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(stacks, "_find_uv", lambda: "uv")
    installs: list[list[str]] = []

    def run(cmd: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        if list(cmd[-2:]) == ["config", "list"]:
            return subprocess.CompletedProcess(list(cmd), 0, config + "\n", "")
        _make_venv(cmd)
        if "install" in cmd:
            installs.append(list(cmd))
        return subprocess.CompletedProcess(list(cmd), 0, "", "")

    stacks.build_environment(["numpy==2.1.0"], tmp_path, run)
    (install,) = installs
    given = [install[i + 1] for i, arg in enumerate(install) if arg == "--index-strategy"]
    assert given == ([strategy] if strategy else [])


def test_no_disk_space_names_the_cache(tmp_path: Path) -> None:
    def run(cmd: Sequence[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            list(cmd), 1, "", "OSError: [Errno 28] No space left on device"
        )

    with pytest.raises(PerfsuiteError, match=f"no disk space .* in {tmp_path}"):
        stacks.build_environment(["numpy"], tmp_path, run)


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("90", 90), ("1.5h", 5400), ("30s", 30)]
)
def test_budgets(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "-5m", "0", "nanm", "infs"])
def test_a_bad_budget_is_one_line(text: str) -> None:
    with pytest.raises(PerfsuiteError, match="--budget"):
        parse_budget(text)


def test_two_environments_of_one_base_interpreter_are_two_stacks(tmp_path: Path) -> None:
    for name in ("old", "new"):
        (tmp_path / name / "bin").mkdir(parents=True)
        (tmp_path / name / "bin" / "python").symlink_to(sys.executable)
    old, new = (str(tmp_path / n / "bin" / "python") for n in ("old", "new"))
    assert not ab_run.same_stack(old, new, {}, {})
    assert ab_run.same_stack(old, str(tmp_path / "old" / "bin" / ".." / "bin" / "python"), {}, {})
    assert not ab_run.same_stack(old, old, {}, {"OPENBLAS_CORETYPE": "Sandybridge"})


@pytest.mark.parametrize("spec", ["venv-old", "numpy", "tensorflow-cpu numpy"])
def test_a_bare_name_that_is_no_path_is_not_installed_from_the_index(spec: str) -> None:
    with pytest.raises(PerfsuiteError, match="pins no version"):
        stacks.resolve(spec)


def test_a_check_that_b_crashes_on_fails_the_comparison() -> None:
    reading = rounds.Reading("GB/s", True, 0.05, (1.0, 1.0, 1.0), "pass")
    runs = [
        rounds.SideRun(1, "A", 0, 1.0, 0, "", {"c": reading, "d": reading}),
        rounds.SideRun(1, "B", 1, 1.0, 1, "", {"d": reading}, ("c",)),
    ]
    broken = broken_by_b(runs)
    assert broken == ("c",)
    assert decide_exit([_verdict("same")], "", frozenset({"regressed"}), broken) == 1


def test_side_variables() -> None:
    assert parse_env(["A=1", "B_2=x=y"], "--b-env") == {"A": "1", "B_2": "x=y"}
    with pytest.raises(PerfsuiteError, match="NAME=VALUE"):
        parse_env(["=1"], "--b-env")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--a", "./nowhere", "--b", "./nowhere"], "no such interpreter"),
        (["--a", "what is this?", "--b", "x"], "unknown stack spec"),
        (["--a", sys.executable, "--b", sys.executable, "--budget", "soon"], "--budget"),
        (["--a", "x", "--b", "y", "--min-rounds", "1"], "at least 2 rounds"),
    ],
)
def test_the_command_reports_bad_input_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["ab", *argv, "--", "suites/"]) == outcome.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


# ---------------------------------------------------------------- the side plugin


def test_a_side_runs_only_the_checks_its_selection_names(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sel="""
        import pytest

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_n(n):
            pass
        """
    )
    select = pytester.path / "sel.txt"
    select.write_text("test_sel.py::test_n[2]\n")
    result = pytester.runpytest("-p", "perfsuite.ab.side", "--perf-ab-select", str(select))
    result.assert_outcomes(passed=1, deselected=2)


# A check that copies a small array, for the side's pytester tests.
COPY_CHECK = copy_check(1 << 12)


def test_a_side_takes_no_machine_probe(pytester: pytest.Pytester) -> None:
    """The pair cancels the machine's state: a side skips the probe a stored baseline needs."""
    pytester.makepyfile(test_copy=COPY_CHECK)
    pytester.makeconftest(
        """
        import pytest
        READINGS = []

        @pytest.hookimpl(tryfirst=True)
        def pytest_perfsuite_machine_reading():
            READINGS.append(1)  # counted, then the steady reading of perfsuite.testing

        def pytest_sessionfinish():
            print(f"machine readings: {len(READINGS)}")
        """
    )
    args = ("-s", "-p", "no:cacheprovider", "-p", "perfsuite.testing", "--perf-html", "no")
    alone = pytester.runpytest(*args)
    alone.assert_outcomes(passed=1)
    alone.stdout.fnmatch_lines(["*machine readings: 2*"])  # before and after the check
    side = pytester.runpytest(*args, "-p", "perfsuite.ab.side")
    side.assert_outcomes(passed=1)
    side.stdout.fnmatch_lines(["*machine readings: 0*"])


def test_a_sides_record_keeps_the_brief_policy_it_measured_under(
    pytester: pytest.Pytester,
) -> None:
    """No settling windows, no untimed sample, no top-ups, no probe; and the record says so."""
    pytester.makepyfile(test_copy=COPY_CHECK)
    args = ("-p", "no:cacheprovider", "-p", "perfsuite.testing", "--perf-html", "no")

    def policy(*more: str) -> dict[str, object]:
        out = pytester.path / f"records{len(more)}"
        pytester.runpytest(*args, "--perf-report-dir", str(out), *more).assert_outcomes(passed=1)
        (path,) = out.rglob("*.json")
        (result,) = json.loads(path.read_text())["results"]
        return dict(result["policy"])

    alone = policy("--perf-quick")
    side = policy("--perf-quick", "-p", "perfsuite.ab.side")
    assert (alone["warmup"], alone["machine_probe"]) == (1, True)
    assert alone["max_repetitions"] > alone["repetitions"]
    assert (side["warmup"], side["warmup_max_seconds"], side["machine_probe"]) == (0, 0.0, False)
    assert side["max_repetitions"] == side["repetitions"]
    assert side["warmup_windows"] == [] and side["warmup_settled"] is None


def test_a_side_keeps_the_sweep_cases_that_quick_mode_leaves_out(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_modes="""
        import pytest

        def test_representative():
            pass

        @pytest.mark.perf_sweep
        def test_sweep():
            pass

        @pytest.mark.perf_full
        def test_full_only():
            pass
        """
    )
    alone = pytester.runpytest("--perf-quick", "--perf-html", "no")
    alone.assert_outcomes(passed=1, deselected=2)
    side = pytester.runpytest("-p", "perfsuite.ab.side", "--perf-quick", "--perf-html", "no")
    side.assert_outcomes(passed=2, deselected=1)


# ---------------------------------------------------------------- bisect on fake steps


class FakeAB:
    """A/B steps of a package whose release ``bad`` made one check 30% slower."""

    def __init__(
        self,
        bad: str,
        broken: frozenset[str] = frozenset(),
        undecided: bool = False,
        unsure: frozenset[str] = frozenset(),
    ) -> None:
        self.undecided = undecided
        self.unsure = unsure
        self.bad = Version(bad)
        self.broken = broken
        self.steps: list[tuple[str, str, tuple[str, ...] | None]] = []

    def __call__(self, options: ab_run.Options) -> object:
        a = Version(options.a.split("==")[1])
        b = Version(options.b.split("==")[1])
        self.steps.append((str(a), str(b), options.selection))
        slow = a < self.bad <= b
        checks = [
            CheckVerdict(
                "gemm", "TFLOP/s", True, 0.05, (1, 2, 3), (), None, "regressed" if slow else "same"
            ),
            CheckVerdict("stream", "GB/s", True, 0.05, (1, 2, 3), (), None, "same"),
        ]
        if options.selection is not None:
            checks = [c for c in checks if c.id in options.selection]
        failed = "exited 1 without a run record" if str(b) in self.broken else ""
        runs = [rounds.SideRun(1, "B", 0, 1.0, 1, failed, {}, (), "", "", "ImportError", {})]
        session = rounds.Session(runs=runs, order=[("A", "B")] * 3, seconds=10.0)
        if self.undecided or str(b) in self.unsure:
            checks = [dataclasses.replace(c, verdict="unknown") for c in checks]
        return SimpleNamespace(checks=checks, session=session, record=Path("x.json"))


VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7"]


def _bisect_options(tmp_path: Path) -> bisect.BisectOptions:
    ab = ab_run.Options("", "", ("suites/",), rounds.Plan())
    return bisect.BisectOptions("tinypkg", "1.0", "1.7", (), ab, tmp_path)


def _resolve(spec: str, cache: Path | None) -> stacks.Stack:
    if "1.3" in spec and "uninstallable" in str(cache):
        raise PerfsuiteError("could not build an environment with tinypkg==1.3: no wheel")
    return stacks.Stack(spec, "requirements", sys.executable, (spec,), 0.0, True)


@pytest.mark.parametrize("bad", VERSIONS[1:])
def test_bisect_names_the_first_bad_release_in_log2_plus_one_steps(
    bad: str, tmp_path: Path
) -> None:
    fake = FakeAB(bad)
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert search.first_bad == bad
    assert len(fake.steps) <= math.ceil(math.log2(len(VERSIONS))) + 1
    assert search.focus == ("gemm",)
    assert all(sel == ("gemm",) for _, _, sel in fake.steps[1:])
    lines = bisect.summary_lines(search)
    assert any(f"gemm: first bad tinypkg {bad}" in line for line in lines)
    assert (tmp_path / next(tmp_path.iterdir()).name / "bisect.html").is_file()


def test_bisect_skips_a_release_that_will_not_install_or_run(tmp_path: Path) -> None:
    fake = FakeAB("1.4", broken=frozenset({"1.5"}))
    options = dataclasses.replace(
        _bisect_options(tmp_path),
        ab=dataclasses.replace(_bisect_options(tmp_path).ab, cache=tmp_path / "uninstallable"),
    )
    search = bisect.bisect(options, lambda _: VERSIONS, fake, lambda _: None, _resolve)
    assert "1.3" in search.skipped and "no wheel" in search.skipped["1.3"]
    # 1.2 is good and 1.4 bad; 1.3, between them, could not be judged: 1.4 is not named.
    assert search.range == ("1.2", "1.4") and not search.first_bad
    fake = FakeAB("1.3", broken=frozenset({"1.1"}))
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert search.first_bad == "1.3" and "does not run" in search.skipped["1.1"]


def test_an_undecided_step_is_skipped_never_counted_good(tmp_path: Path) -> None:
    # 1.3 is bad but its step cannot decide: counted good, the search would name 1.4.
    fake = FakeAB("1.3", unsure=frozenset({"1.3"}))
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert search.skipped["1.3"] == "1 focus checks undecided within the budget"
    assert search.first_bad in ("", "1.3") or search.range is not None
    assert search.first_bad != "1.4"


def test_when_every_release_between_is_skipped_bisect_gives_the_range(tmp_path: Path) -> None:
    fake = FakeAB("1.4", unsure=frozenset(VERSIONS[1:-1]))
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert search.range == ("1.0", "1.7") and not search.first_bad
    assert search.exit_status == outcome.EXIT_INCONCLUSIVE
    assert any("after 1.0, up to 1.7" in line for line in bisect.summary_lines(search))


def test_bisect_says_nothing_regressed_after_one_step(tmp_path: Path) -> None:
    fake = FakeAB("9.0")
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert len(fake.steps) == 1 and not search.first_bad
    assert any("nothing regressed" in line for line in bisect.summary_lines(search))
    assert search.exit_status == 0


def test_bisect_with_undecided_checks_is_not_a_clean_bill(tmp_path: Path) -> None:
    fake = FakeAB("9.0", undecided=True)
    search = bisect.bisect(
        _bisect_options(tmp_path), lambda _: VERSIONS, fake, lambda _: None, _resolve
    )
    assert search.exit_status == outcome.EXIT_INCONCLUSIVE
    assert any("2 of 2 checks undecided" in line for line in bisect.summary_lines(search))


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        ("1.7", "1.0", "newer than"),
        ("1.0", "1.0", "the same version"),
        ("0.9", "1.7", r"0.9 \(--good\) is not on the index"),
        ("1.0", "banana", "--bad 'banana' is not a version"),
    ],
)
def test_bisect_refuses_a_range_it_cannot_search(good: str, bad: str, message: str) -> None:
    with pytest.raises(PerfsuiteError, match=message):
        bisect.releases_between("tinypkg", good, bad, lambda _: VERSIONS)


def test_the_page_draws_the_forest_and_the_rounds(tmp_path: Path) -> None:
    sides = FakeSides(CHECKS, slowdown=0.2, noise=0.02, seed=5)
    session = rounds.run_rounds(
        rounds.one_then_the_other(sides), rounds.Plan(min_rounds=3, max_rounds=6), clock=sides.clock
    )
    checks, only_in, unhealthy = gather(session.states, session.runs)
    stack = stacks.Stack("x", "python", sys.executable)
    result = Outcome(
        "id", "now", {"A": stack, "B": stack}, {"A": {}, "B": {}},
        (("software.numpy.version", "2.1.0", "2.2.0"),), False, rounds.Plan(), ("suites/",),
        (), session, checks, only_in, unhealthy, (), frozenset({"regressed"}),
        decide_exit(checks, "", frozenset({"regressed"})),
    )  # fmt: skip
    page = report_ab.write_html(result, tmp_path / "ab.html").html
    assert page is not None
    text = page.read_text()
    assert text.count("<svg") == 1  # the forest and the per-round strip, one figure
    assert "each round" in text and "round</text>" in text.replace("\n", "")
    assert "software.numpy.version" in text and "2.2.0" in text
    assert "perfsuite ab: REGRESSED" in report_ab.verdict_line(result)
    lines = report_ab.summary_lines(result)
    assert lines[0].startswith("check ") and lines[-1] == report_ab.verdict_line(result)


def test_a_floor_missed_under_foreign_load_says_nothing_about_the_node() -> None:
    load = ("foreign-load",)
    failing = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "fail", load)
    passing = rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass")
    runs = [
        rounds.SideRun(r, side, 0, 1.0, 1, "", {"c": failing if r > 1 else passing})
        for r in (1, 2, 3)
        for side in "AB"
    ]
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    _, _, unhealthy = gather(states, runs)
    assert unhealthy == ()


def test_each_round_says_which_pairs_it_kept_under_load_and_which_it_left_out() -> None:
    said: list[str] = []
    progress = ab_run._Progress(rounds.Plan(), said.append)

    def side(name: str, loads: tuple[float, float]) -> rounds.SideRun:
        c, d = (
            rounds.Reading("GB/s", True, 0.05, (1.0,) * 3, "pass", ("loaded",), x) for x in loads
        )
        return rounds.SideRun(1, name, 0, 4.0, 0, "", {"c": c, "d": d})

    progress(1, 20, 3, 500.0, [side("A", (0.95, 0.1)), side("B", (0.97, 0.9))])
    assert "1 pair under a shared load (0.96 cores), kept" in said[-1]
    assert "1 left out: the load changed between A's and B's readings (1)" in said[-1]


def test_a_budget_too_short_to_call_a_change_is_said_after_the_second_round() -> None:
    # Under a burner a round of 21 checks took 134 s: 10 minutes held 4 rounds, and the
    # sign-flip guard calls a change from round 5 on.  The user hears it after round 2, at
    # its pace: round 1 paid once for imports and first pages (130 s, then 88 s a round).
    plan = rounds.Plan(budget_s=600.0)
    assert rounds.short_budget(134.0, plan) == (4, pytest.approx(5 * 134.0 * 1.05))
    assert rounds.short_budget(100.0, plan) is None  # 6 rounds fit
    assert rounds.short_budget(218.0, plan, 88.0, done=2) is None  # 2 + 4 rounds fit
    assert rounds.short_budget(334.0, plan, 134.0, done=2) == (
        3,
        pytest.approx((334 + 3 * 134) * 1.05),
    )
    assert rounds.short_budget(134.0, rounds.Plan(min_rounds=2, max_rounds=4)) is None
    said: list[str] = []
    progress = ab_run._Progress(plan, said.append)
    run = rounds.SideRun(1, "A", 0, 60.0, 0, "", {})
    progress(1, 20, 21, 600.0 - 200.0, [run])
    assert len(said) == 1  # round 1 is not the pace: nothing said yet
    progress(2, 20, 21, 600.0 - 334.0, [run])
    assert said[-1] == (
        "after 2 rounds in 334 s, at 134 s per round, --budget 10m holds 3 rounds, and a change "
        "is called from round 5 on: --budget 13m or more, or fewer checks (-k), let the rounds "
        "decide"
    )
    progress(3, 20, 21, 600.0 - 468.0, [run])  # said once
    assert len(said) == 4
    # A first round longer than the whole budget: it ran, so the budget held one, and the
    # user hears it at once, as no second round will run.
    assert rounds.short_budget(700.0, plan) == (1, pytest.approx(5 * 700.0 * 1.05))
    said.clear()
    progress = ab_run._Progress(plan, said.append)
    progress(1, 20, 21, 0.0, [run])
    assert said[-1].startswith("at 600 s per round, --budget 10m holds 1 round, ")
    progress(2, 20, 21, 0.0, [run])  # a round 2 ran after all: not said twice
    assert len(said) == 3
    # A short pace after a slow first round: nothing to say.
    said.clear()
    progress = ab_run._Progress(plan, said.append)
    progress(1, 20, 21, 600.0 - 130.0, [run])
    progress(2, 20, 21, 600.0 - 218.0, [run])
    assert len(said) == 2
    # A round 2 cut short by a failed side sets no pace: round 3 does.
    said.clear()
    progress = ab_run._Progress(plan, said.append)
    failed = rounds.SideRun(2, "B", 0, 5.0, 1, "exit 1 before any check", {})
    progress(1, 20, 21, 600.0 - 200.0, [run])
    progress(2, 20, 21, 600.0 - 205.0, [run, failed])
    assert len(said) == 2
    progress(3, 20, 21, 600.0 - 339.0, [run])
    assert said[-1].startswith("after 3 rounds in 339 s, at 134 s per round, --budget 10m holds 4 ")


def test_a_round_cap_that_can_never_call_a_change_is_said_before_the_rounds() -> None:
    assert ab_run.round_cap_note(rounds.Plan(min_rounds=3, max_rounds=4)) == (
        "--max-rounds 4: a change is called from round 5 on, so these rounds can read same or "
        "unknown, never regressed or improved"
    )
    assert ab_run.round_cap_note(rounds.Plan(min_rounds=3, max_rounds=5)) == ""


def test_uv_beside_the_interpreter_is_found_without_an_activated_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tmp_path / "bin"
    scripts.mkdir()
    uv = scripts / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(stacks.sysconfig, "get_path", lambda name: str(scripts))
    assert stacks._find_uv() == str(uv)
    uv.chmod(0o644)  # not executable: venv + pip instead
    assert stacks._find_uv() is None


def test_a_side_starts_without_importing_scipy_stats() -> None:
    """A side never judges a baseline: the plugin and the side load no ``scipy.stats``.

    It costs half a second or more of every side's start; the verdicts import it when
    they first need it.
    """
    code = (
        "import sys\n"
        "import perfsuite.plugin, perfsuite.ab.side, perfsuite.judge.stats, perfsuite.ab.paired\n"
        "assert 'scipy.stats' not in sys.modules, 'scipy.stats was imported at load'\n"
        "print(perfsuite.judge.stats.critical_t(0.05, 10))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) == pytest.approx(sps.t.ppf(0.975, 10))


class _FakeTurns:
    """A side's end of the protocol that only records what it said."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def take(self, what: str) -> None:
        self.said.append(f"want {what}")

    def give(self, what: str) -> None:
        self.said.append(f"done {what}")

    def over(self, what: str) -> None:
        self.said.append(f"over {what}")


def test_a_side_hands_over_between_samples_and_counts_only_the_lent_cpu_as_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other side's CPU during a hand-over is the session's; the rest stays foreign."""
    # CPU seconds of the tree under perfsuite ab, and of this side's own tree.
    cpu = {"root": 10.0, "own": 4.0}
    monkeypatch.setattr(
        side_plugin.noise, "own_cpu_seconds", lambda root=None: cpu["root" if root else "own"]
    )
    real = side_plugin.noise.Snapshot(
        wall=0.0, busy=20.0, steal=0.0, own=4.0, load=(), cpu_mhz=None
    )
    monkeypatch.setattr(side_plugin.noise, "snapshot", lambda with_gpus=True: real)
    turns = _FakeTurns()
    lent = side_plugin._Lent(root=1)
    plugin = side_plugin._Turns(turns, per_sample=True, lent=lent)  # type: ignore[arg-type]
    plugin.take("t::x")
    hand_over = plugin.pytest_perfsuite_between_samples(nodeid="t::x")
    assert hand_over is not None

    def other_side_runs(what: str) -> None:  # while this side waits, the other measures
        turns.said.append(f"want {what}")
        cpu["root"] += 0.3

    turns.take = other_side_runs  # type: ignore[method-assign]
    hand_over(2)
    cpu["root"] += 0.5  # the other side's work while this side measures: not lent
    assert turns.said == ["want t::x", "done t::x", "want t::x#2"]
    assert plugin.holding == "t::x#2"
    assert lent.seconds == pytest.approx(0.3)
    wrapper = lent.pytest_perfsuite_noise_snapshot(with_gpus=False)
    next(wrapper)
    with pytest.raises(StopIteration) as ended:
        wrapper.send(None)  # no other plugin read the machine: the real reading, adjusted
    assert ended.value.value.own == pytest.approx(4.3)
    given = dataclasses.replace(real, own=1.0)
    wrapper = lent.pytest_perfsuite_noise_snapshot(with_gpus=False)
    next(wrapper)
    with pytest.raises(StopIteration) as ended:
        wrapper.send(given)  # a plugin's reading stands
    assert ended.value.value is given


def test_a_check_s_alarm_is_paused_while_the_other_side_has_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A per-check time limit (pytest-timeout's ``signal`` method) counts only own time."""
    log: list[str] = []
    alarm = {"left": 12.5}

    def setitimer(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        assert which == signal.ITIMER_REAL
        log.append(f"alarm {seconds}")
        old, alarm["left"] = alarm["left"], seconds
        return old, 0.0

    monkeypatch.setattr(side_plugin.signal, "setitimer", setitimer)
    turns = _FakeTurns()
    turns.take = lambda what: log.append(f"want {what}")  # type: ignore[method-assign]
    turns.give = lambda what: log.append(f"done {what}")  # type: ignore[method-assign]
    plugin = side_plugin._Turns(turns, per_sample=True, lent=None)  # type: ignore[arg-type]
    plugin.take("t::x")
    hand_over = plugin.pytest_perfsuite_between_samples(nodeid="t::x")
    assert hand_over is not None
    hand_over(2)
    # stopped before the turn goes, armed again with what was left once it is back
    assert log == ["want t::x", "alarm 0", "done t::x", "want t::x#2", "alarm 12.5"]
    alarm["left"] = 0.0  # no alarm armed: none is armed after the hand-over either
    log.clear()
    hand_over(3)
    assert log == ["alarm 0", "done t::x#2", "want t::x#3"]


def test_a_side_taking_turns_check_by_check_never_hands_over_mid_check() -> None:
    plugin = side_plugin._Turns(_FakeTurns(), per_sample=False, lent=None)  # type: ignore[arg-type]
    assert plugin.pytest_perfsuite_between_samples(nodeid="t::x") is None


def test_a_device_check_the_host_load_could_not_reach_is_judged_whatever_the_load() -> None:
    from perfsuite.model import (
        BaselineVerdict,
        FloorVerdict,
        LoadNotFlagged,
        NoiseReading,
        Result,
        RunRecord,
        Summary,
        Work,
    )  # fmt: skip

    def record(load: float) -> RunRecord:
        result = Result(
            id="t.py::test[gpu]", check="gemm", params={"device": "gpu:0"}, metric="m",
            unit="TFLOP/s", higher_is_better=True, samples=(1.0, 1.0, 1.0), seconds=(1.0,) * 3,
            summary=Summary(1.0, 1.0, 1.0, 1.0, 3, None), work=Work(1.0, "FLOP"),
            floor=FloorVerdict("no-reference"), baseline=BaselineVerdict("new"),
            noise=NoiseReading(foreign_cores=load, load_not_flagged=LoadNotFlagged("gpu:0")),
        )  # fmt: skip
        return RunRecord("r", "2026-12-02T00:00:00+00:00", {}, {}, (result,))

    a = rounds.readings_of(record(0.1))["t.py::test[gpu]"]
    b = rounds.readings_of(record(1.9))["t.py::test[gpu]"]
    assert a.load is None and rounds.unshared(a, b) == ""


def test_a_readings_flags_are_recorded_as_their_kinds_not_in_words() -> None:
    from perfsuite.model import (
        BaselineVerdict,
        FlagKind,
        FloorVerdict,
        NoiseFlag,
        NoiseReading,
        Result,
        RunRecord,
        Summary,
        Work,
    )  # fmt: skip

    result = Result(
        id="t.py::test[gpu]", check="gemm", params={}, metric="m", unit="TFLOP/s",
        higher_is_better=True, samples=(1.0, 1.0, 1.0), seconds=(1.0,) * 3,
        summary=Summary(1.0, 1.0, 1.0, 1.0, 3, None), work=Work(1.0, "FLOP"),
        floor=FloorVerdict("no-reference"), baseline=BaselineVerdict("new"),
        noise=NoiseReading(foreign_cores=0.9),
        noise_flags=(
            NoiseFlag(FlagKind.FOREIGN_LOAD, cores=0.9),
            NoiseFlag(FlagKind.GPU_THROTTLED, gpu=0, throttled=("hw_slowdown",)),
        ),
    )  # fmt: skip
    reading = rounds.readings_of(RunRecord("r", "2026-12-02T00:00:00+00:00", {}, {}, (result,)))
    assert reading["t.py::test[gpu]"].flags == ("foreign-load", "gpu-throttled")
    assert reading["t.py::test[gpu]"].states == ("gpu-throttled",)
    assert reading["t.py::test[gpu]"].load == 0.9
