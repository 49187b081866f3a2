"""Turn pairs judged by their own loads: a burst splits a turn pair, not a round.

With ``--interleave samples`` the broker hands out the sides' turns sample by sample and reads
the host's foreign load over each turn (:mod:`perfsuite.ab.lockstep`).  A turn pair whose
two turns saw different loads (a neighbour's burst started or stopped between them) is left
out; the round is the median of the turn pairs that shared their conditions
(:func:`perfsuite.ab.rounds.pair_value`).  Unit tests: a fake broker's turns, fake loads.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_ab import _FakeTurns
from test_ab_record import _outcome, _written

from perfsuite.ab import gather, lockstep, rounds
from perfsuite.ab import side as side_plugin
from perfsuite.ab.record import read_outcome
from perfsuite.ab.rounds import TurnLoad
from perfsuite.errors import StorageError
from perfsuite.report import ab as report_ab


def _reading(samples: tuple[float, ...], load: float | None = None) -> rounds.Reading:
    return rounds.Reading("GB/s", True, 0.05, samples, "pass", load=load)


def test_a_turn_pair_is_split_by_a_load_change_past_the_accounting_ticks() -> None:
    assert TurnLoad(1.0, 0.0, 0.4).split  # a burst over one turn only
    assert not TurnLoad(1.0, 0.9, 0.4).split  # a load both turns shared
    assert not TurnLoad(0.5, 0.0, 0.05).split  # 25 ms of CPU time: within two 10 ms ticks
    assert TurnLoad(0.0, 0.3, 1.0).split and not TurnLoad(0.0, 0.2, 1.0).split


def _take_turns(broker: lockstep.Broker, keys: list[str]) -> None:
    """Both sides run the same samples, asking as soon as they may; every turn measured."""
    left = {"A": list(keys), "B": list(keys)}
    for side in ("A", "B"):
        broker.want(side, left[side].pop(0))
    while side := broker.next():
        broker.loads[-1] = (0.9 if len(broker.granted) % 4 == 1 else 0.0, 0.5)
        broker.release(side)
        if left[side]:
            broker.want(side, left[side].pop(0))
        else:
            broker.exited(side)


def test_the_broker_pairs_each_turns_load_with_the_other_sides_same_sample() -> None:
    broker = lockstep.Broker(("A", "B"))
    _take_turns(broker, ["c", "c#2", "c#3"])
    assert [g for g in broker.granted] == [
        ("A", "c"), ("B", "c"), ("B", "c#2"), ("A", "c#2"), ("A", "c#3"), ("B", "c#3"),
    ]  # fmt: skip
    # Turns 1 and 5 (A's first and third) saw 1.8 cores of foreign work for 0.5 s each.
    assert broker.turn_loads() == {
        "c": (TurnLoad(1.8, 0.0, 0.5), TurnLoad(0.0, 0.0, 0.5), TurnLoad(1.8, 0.0, 0.5))
    }
    # A turn that was never said done (its side ended in it) leaves the check to the
    # readings' whole loads.
    broker.loads[3] = None
    assert broker.turn_loads() == {}


def test_the_turn_meter_reads_each_turn_from_its_grant_to_its_end() -> None:
    broker = lockstep.Broker(("A", "B"))
    readings = iter([(100.0, 7.0), (100.5, 7.45)])  # (wall s, foreign CPU s so far)
    turns = lockstep._TurnMeter(broker, lambda: next(readings))
    broker.want("A", "c")
    broker.want("B", "c")
    side = broker.next()
    turns.start(side)
    turns.stop(side)
    assert side == "A" and broker.loads == [pytest.approx((0.45, 0.5))]
    turns.stop("B")  # B holds no turn: nothing is read
    assert broker.loads == [pytest.approx((0.45, 0.5))]


def test_a_side_says_its_last_check_ended_and_keeps_the_turn() -> None:
    """The broker reads the last turn's load at its end, not after the side's own exit."""
    said = _FakeTurns()
    plugin = side_plugin._Turns(said, per_sample=False, lent=None)  # type: ignore[arg-type]
    item = SimpleNamespace(nodeid="t::x")
    for nextitem in (item, None):
        protocol = plugin.pytest_runtest_protocol(item=item, nextitem=nextitem)  # type: ignore[arg-type]
        next(protocol)
        with pytest.raises(StopIteration):
            protocol.send(None)
    assert said.said == ["want t::x", "done t::x", "want t::x", "over t::x"]


def test_a_burst_leaves_out_the_turn_pair_it_split_and_the_round_keeps_the_rest() -> None:
    # A burst halved A's 2nd sample only; B is 10% slower in the turn pairs that shared.
    a, b = _reading((10.0, 5.0, 10.0), 0.3), _reading((9.0, 9.0, 9.0), 0.0)
    loads = (TurnLoad(0.0, 0.0, 0.4), TurnLoad(1.0, 0.0, 0.4), TurnLoad(0.0, 0.0, 0.4))
    value = rounds.pair_value(a, b, True, loads)
    assert not value.left_out and value.by_turns
    assert value.value == pytest.approx(math.log(0.9)) and (value.split, value.turns) == (1, 3)
    # The readings' whole loads differ (0.3 against 0.0 cores): judged whole, the round was
    # left out, though two of its three turn pairs shared their conditions.
    assert rounds.pair_value(a, b, True).left_out == rounds.LOAD_CHANGED
    # Two turn pairs of three split: what is left is not a round's evidence.
    both = (loads[1], loads[1], loads[0])
    assert rounds.pair_value(a, b, True, both) == rounds.PairValue(
        rounds.LOAD_CHANGED, split=2, turns=3
    )
    # A throttled GPU's degree is not measured: the round is left out whatever the loads.
    hot = dataclasses.replace(a, states=("gpu-throttled",))
    assert rounds.pair_value(hot, b, True, loads).left_out == "gpu-throttled"
    # Loads for another number of samples than the readings hold: judged whole.
    assert rounds.pair_value(a, b, True, loads[:2]).left_out == rounds.LOAD_CHANGED
    # A device check the host's load could not reach has no load figure: the host's bursts
    # split none of its turn pairs, and its round is the median of them all.
    device = rounds.pair_value(_reading(a.samples), _reading(b.samples), True, loads)
    assert device == rounds.PairValue("", math.log(0.9), 0.0, True)


def test_the_rounds_count_the_turn_pairs_left_out_and_the_report_says_so() -> None:
    runs = []
    for rnd in range(1, 7):
        k = 1 + rnd / 1000
        a = _reading((10.0, 5.0, 10.0), 0.3)
        b = _reading(tuple(x * k for x in (9.0, 9.0, 9.0)), 0.0)
        loads = {"c": (TurnLoad(0, 0, 0.4), TurnLoad(1.0, 0, 0.4), TurnLoad(0.1, 0.1, 0.4))}
        for side, r in (("A", a), ("B", b)):
            runs.append(
                rounds.SideRun(
                    rnd, side, 0, 1.0, 0, "", {"c": r}, turn_pairs=("c",), turn_loads=loads
                )
            )
    states = rounds.judge(rounds.evidence(runs), rounds.Plan())
    c = states["c"]
    assert c.rounds == tuple(range(1, 7)) and c.tainted == ()
    assert (c.turns_split, c.turns_seen) == (6, 18)
    assert c.loads == pytest.approx((0.05,) * 6) and rounds.verdict(c) == "regressed"
    (check,), _, _ = gather(states, runs)
    assert check.to_dict()["turn_pairs_split"] == 6
    assert "6 of 18 turn pairs split by a load change" in report_ab.note(check)
    assert "6 of 18 turn pairs left out" in report_ab.load_line([check])
    line = report_ab.round_load_words(runs[-2:])
    assert "1 turn pair split by a load change, left out" in line and "left out:" not in line


def test_turn_loads_travel_through_the_record_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    result = _outcome()
    loads = {"c": (TurnLoad(1.0, 0.0, 0.25), TurnLoad(0.5, 0.5, 0.3))}
    runs = [dataclasses.replace(r, turn_loads=loads) for r in result.session.runs]
    result = dataclasses.replace(result, session=dataclasses.replace(result.session, runs=runs))
    path = _written(tmp_path, result)
    again = read_outcome(path)
    assert again.session.runs[0].turn_loads == loads
    assert json.loads(json.dumps(again.to_dict())) == json.loads(path.read_text())
    for bad in ([[1.0, 0.0]], [[1.0, -1.0, 0.2]], [[1.0, "x", 0.2]], "c", [[1e7, 0, 1]]):
        data = json.loads(path.read_text())
        data["rounds"][0]["turn_loads"] = {"c": bad}
        path.write_text(json.dumps(data))
        with pytest.raises(StorageError, match=r"turn_loads\['c'\]|turn_loads: "):
            read_outcome(path)
