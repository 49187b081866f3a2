"""Interleaved rounds: A and B in fresh processes, alternated, until the checks are decided.

Each round runs A once and B once.  The order within rounds is randomised and balanced: the
rounds come in blocks of two, AB then BA or BA then AB, chosen at random per block, so
neither side always runs first and a trend over the session cancels within each block.
After ``min_rounds`` only the checks still undecided run, and rounds go on until none is
left, ``max_rounds`` is reached, or the next round would overrun the budget.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfsuite.ab import paired
from perfsuite.judge import stats
from perfsuite.measure.noise import FOREIGN_LOAD_CORES, FOREIGN_MIN_SECONDS
from perfsuite.model import FlagKind, RunRecord
from perfsuite.settings import DEFAULT_TOLERANCE

SIDES = ("A", "B")
INTERLEAVES = ("samples", "checks", "processes")

# Two readings of a pair whose foreign loads differ by more than this saw different
# conditions (a load started or stopped between them); the noise guard's own threshold.
LOAD_MATCH_CORES = FOREIGN_LOAD_CORES
# Why a pair was left out: its two readings saw different conditions.
LOAD_CHANGED = "load-changed"  # a foreign load started or stopped between the two readings
LOAD_UNKNOWN = "load-unknown"  # one reading was flagged for load, the other has no figure


@dataclass(frozen=True)
class TurnLoad:
    """The foreign load over the two turns of one turn pair: A's i-th sample and B's i-th.

    Measured by the broker that handed the turns out (:mod:`perfsuite.ab.lockstep`): the
    host's busy CPU time and steal over each turn, less the A/B's own process tree's, over
    the turn's wall time.  ``wall_s`` is the shorter turn's.
    """

    a: float  # cores
    b: float  # cores
    wall_s: float

    @property
    def split(self) -> bool:
        """Whether a load started or stopped between the two turns (it did not cancel).

        Their loads differ by more than :data:`LOAD_MATCH_CORES`, by more CPU time than the
        kernel's accounting ticks can blur (:data:`FOREIGN_MIN_SECONDS`).
        """
        gap = abs(self.a - self.b)
        return gap > LOAD_MATCH_CORES and gap * self.wall_s >= FOREIGN_MIN_SECONDS

    def to_list(self) -> list[float]:
        """Its stored form, ``[a, b, wall_s]``."""
        return [round(self.a, 3), round(self.b, 3), round(self.wall_s, 4)]


@dataclass(frozen=True)
class Reading:
    """One check on one side in one round."""

    unit: str
    higher_is_better: bool
    tolerance: float
    samples: tuple[float, ...]
    floor: str  # the floor verdict in that run: pass, fail, no-reference
    # The kinds of the noise guard's flags (``foreign-load``, ``gpu-throttled``, ...; see
    # ``FlagKind``).  Older records hold the flags' words; only whether there are any is
    # read.
    flags: tuple[str, ...] = ()
    # The foreign load the noise guard measured beside it, in cores (None: not recorded).  A
    # load both readings of a pair share cancels in B/A; a load only one saw does not.
    load: float | None = None
    # The kinds of its flags that are states, not a load (a throttled GPU, the CPUs' link
    # changed): a pair with one is left out, as a state's degree is not measured.
    states: tuple[str, ...] = ()

    @property
    def median(self) -> float:
        """The side's value for the round: the median of its samples."""
        return stats.summarize(self.samples).median


@dataclass(frozen=True)
class SideRun:
    """One side's process in one round."""

    round: int
    side: str
    position: int  # 0: ran first in its round
    seconds: float
    returncode: int | None  # None: killed (a hang past the timeout, or an interrupt)
    failed: str  # why it gave no evidence; "" when it did
    readings: Mapping[str, Reading] = field(default_factory=dict)
    crashed: tuple[str, ...] = ()  # selected checks that produced no result
    record: str = ""  # the side's run record
    log: str = ""  # the side's output, in full
    output_tail: str = ""  # the end of the output, when it failed
    environment: Mapping[str, Any] = field(default_factory=dict)
    selected: int = 0  # checks the round asked for (0: the whole selection)
    waited: float = 0.0  # of ``seconds``, the time it waited for turns (sides in lockstep)
    forked: bool = False  # a fork of its side's warm interpreter, not a new process
    # The round's checks whose samples both sides took turn by turn, A's i-th and B's i-th
    # a turn apart (:meth:`perfsuite.ab.lockstep.Broker.turn_pairs`); the same on both sides.
    turn_pairs: tuple[str, ...] = ()
    # For those checks, each turn pair's foreign load, in sample order, where the broker
    # measured every turn of the check; the same on both sides.
    turn_loads: Mapping[str, tuple[TurnLoad, ...]] = field(default_factory=dict)

    @property
    def own_seconds(self) -> float:
        """The side's own time: its process's life less the time it waited for turns."""
        return self.seconds - self.waited

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with every sample."""
        return {
            "round": self.round,
            "side": self.side,
            "position": self.position,
            "seconds": round(self.seconds, 3),
            "waited": round(self.waited, 3),
            "forked": self.forked,
            "turn_pairs": list(self.turn_pairs),
            "turn_loads": {c: [t.to_list() for t in ts] for c, ts in self.turn_loads.items()},
            "returncode": self.returncode,
            "failed": self.failed,
            "selected": self.selected,
            "record": self.record,
            "log": self.log,
            "output_tail": self.output_tail,
            "crashed": list(self.crashed),
            "readings": {
                check: {
                    "unit": r.unit,
                    "higher_is_better": r.higher_is_better,
                    "tolerance": r.tolerance,
                    "floor": r.floor,
                    "median": r.median,
                    "samples": list(r.samples),
                    "flags": list(r.flags),
                    "load": r.load,
                    "states": list(r.states),
                }
                for check, r in self.readings.items()
            },
        }


def readings_of(record: RunRecord) -> dict[str, Reading]:
    """Each measured check of a run record, as a reading."""
    out = {}
    for result in record.results:
        if not result.samples:
            continue
        tolerance = result.baseline.tolerance or DEFAULT_TOLERANCE
        load = result.noise.foreign_cores
        if result.noise.load_not_flagged is not None:
            load = None  # a device check the host's load could not reach: not compared
        out[result.id] = Reading(
            result.unit,
            result.higher_is_better,
            float(tolerance),
            tuple(result.samples),
            result.floor.verdict,
            tuple(str(f.kind) for f in result.noise_flags),
            float(load) if isinstance(load, int | float) and math.isfinite(load) else None,
            tuple(str(f.kind) for f in result.noise_flags if f.kind is not FlagKind.FOREIGN_LOAD),
        )
    return out


def unshared(a: Reading, b: Reading) -> str:
    """Why a pair's two readings saw different conditions ("": they shared them).

    A steady load beside both (another job on the node, a burner) slows both alike and
    cancels in B/A, so it is kept and recorded.  A load that started or stopped between the
    two readings (their loads differ by more than :data:`LOAD_MATCH_CORES`) does not cancel,
    nor does a state such as a throttled GPU, whose degree is not measured.
    """
    state = first_state(a, b)
    if state:
        return state
    if a.load is None or b.load is None:
        return LOAD_UNKNOWN if a.flags or b.flags else ""
    return LOAD_CHANGED if abs(a.load - b.load) > LOAD_MATCH_CORES else ""


def first_state(a: Reading, b: Reading) -> str:
    """The first state either reading saw that is not a load (a throttled GPU), or ""."""
    return next(iter(a.states + b.states), "")


def shared_load(a: Reading, b: Reading) -> float:
    """The load a kept pair's two readings shared, in cores (0 when not recorded)."""
    return ((a.load or 0.0) + (b.load or 0.0)) / 2


def pairs_of(runs: Sequence[SideRun]) -> list[tuple[str, Reading, Reading]]:
    """The (check, A, B) reading pairs of one round's runs (both sides, neither failed)."""
    sides = {r.side: r for r in runs if not r.failed}
    if set(sides) != set(SIDES):
        return []
    a, b = sides["A"].readings, sides["B"].readings
    return [(c, a[c], b[c]) for c in sorted(a.keys() & b.keys())]


def orders(seed: int | None = None) -> Iterator[tuple[str, str]]:
    """The side order of each round: blocks of two rounds, AB BA or BA AB, at random."""
    rng = random.Random(seed)
    while True:
        first = ("A", "B") if rng.random() < 0.5 else ("B", "A")
        yield first
        yield (first[1], first[0])


@dataclass(frozen=True)
class Plan:
    """How many rounds, for how long, judged how."""

    min_rounds: int = 3
    max_rounds: int = 20
    budget_s: float = 600.0
    alpha: float = stats.ALPHA
    correction: str = stats.DEFAULT_CORRECTION
    tolerance: float | None = None  # None: each check's own
    seed: int | None = None
    # samples: both sides' processes start together and take turns sample by sample within
    # each check (lockstep); checks: the same, check by check; processes: one side's process
    # runs all its checks, then the other's.
    interleave: str = "samples"

    def __post_init__(self) -> None:
        """Reject plans that cannot run."""
        if self.interleave not in INTERLEAVES:
            raise ValueError(f"interleave {self.interleave!r}: choose one of {INTERLEAVES}")
        if self.min_rounds < 2:
            raise ValueError("an A/B needs at least 2 rounds before it judges")
        if self.max_rounds < self.min_rounds:
            raise ValueError("the round cap is below the minimum rounds")
        if self.budget_s <= 0:
            raise ValueError("the budget must be positive")


@dataclass(frozen=True)
class CheckState:
    """A check's evidence and verdict so far."""

    id: str
    unit: str
    higher_is_better: bool
    tolerance: float
    log_ratios: tuple[float, ...]  # one per round where both sides measured it
    rounds: tuple[int, ...]  # which rounds those are
    judged: paired.Judged | None  # None: fewer than 2 rounds
    tainted: tuple[int, ...] = ()  # rounds left out: its two readings saw different conditions
    left_out: tuple[str, ...] = ()  # why, one per round in ``tainted`` (see :func:`unshared`)
    loads: tuple[float, ...] = ()  # the load each kept round's pair shared, in cores
    by_turns: tuple[int, ...] = ()  # the rounds whose value is their turn pairs' median
    # Turn pairs left out of kept rounds because a load started or stopped between their
    # two turns (the round's other turn pairs judged it), and the turn pairs of those rounds.
    turns_split: int = 0
    turns_seen: int = 0


@dataclass(frozen=True)
class PairValue:
    """What one round gives on one check: its value, or why it was left out."""

    left_out: str = ""  # why (see :func:`unshared`); "" when kept
    value: float = 0.0  # ln(B/A)
    load: float = 0.0  # the load the kept readings (or turn pairs) shared, in cores
    by_turns: bool = False
    split: int = 0  # turn pairs left out: a load started or stopped between their turns
    turns: int = 0  # turn pairs measured (0: the round was not judged by turn pairs)


def round_value(a: Reading, b: Reading, by_turns: bool = False) -> float:
    """A round's evidence on one check: the log ratio of B over A.

    By default the ratio of the two sides' medians.  ``by_turns`` is for a check whose
    samples the sides took turn by turn (:attr:`SideRun.turn_pairs`): A's i-th sample and
    B's i-th were a turn apart, and the value is the median over i of ``ln(B_i / A_i)``.  A
    load that comes and goes within the check (a neighbour's burst of a few seconds) lands on
    both samples of most turn pairs and cancels in each pair's ratio; a pair it split is one
    of the median's outliers.  The sides' medians would instead take whichever samples the
    burst happened to hit on each side.  Unequal sample counts, or a sample that is not
    positive, leave the medians.
    """
    if by_turns and pairable(a, b):
        logs = [math.log(y / x) for x, y in zip(a.samples, b.samples, strict=True)]
        return float(np.median(logs))
    return math.log(b.median / a.median)


def pairable(a: Reading, b: Reading) -> bool:
    """Whether two readings' samples can be paired by index: as many, two or more, positive."""
    return len(a.samples) == len(b.samples) >= 2 and all(x > 0 for x in a.samples + b.samples)


def pair_value(
    a: Reading, b: Reading, paired: bool, loads: Sequence[TurnLoad] | None = None
) -> PairValue:
    """One round's value on one check, or why its two readings cannot give one.

    ``paired``: the sides took the check's samples turn by turn.  With every turn pair's
    load (``loads``), the pair's conditions are judged turn by turn: a burst that started or
    stopped between two turns leaves out that turn pair only, and the round is the median of
    the rest (left out when fewer than two remain).  Otherwise, and for readings without a
    load figure (a device check the host's load could not reach), the whole check's readings
    are judged (:func:`unshared`), and the value is :func:`round_value`'s.
    """
    by_turns = paired and pairable(a, b)
    loaded = a.load is not None and b.load is not None
    if by_turns and loaded and loads is not None and len(loads) == len(a.samples):
        state = first_state(a, b)
        if state:
            return PairValue(state)
        kept = [i for i, t in enumerate(loads) if not t.split]
        split = len(loads) - len(kept)
        if len(kept) < 2:
            return PairValue(LOAD_CHANGED, split=split, turns=len(loads))
        logs = [math.log(b.samples[i] / a.samples[i]) for i in kept]
        load = sum((loads[i].a + loads[i].b) / 2 for i in kept) / len(kept)
        return PairValue("", float(np.median(logs)), load, True, split, len(loads))
    why = unshared(a, b)
    if why:
        return PairValue(why)
    return PairValue("", round_value(a, b, by_turns), shared_load(a, b), by_turns)


def round_pairs(runs: Sequence[SideRun]) -> list[tuple[str, Reading, PairValue]]:
    """Each check one round's runs compared: (check, A's reading, the round's value)."""
    sides = [r for r in runs if not r.failed]
    paired = set.intersection(*(set(r.turn_pairs) for r in sides)) if sides else set()
    loads = sides[0].turn_loads if sides else {}
    out = []
    for check, ra, rb in pairs_of(runs):
        if ra.unit != rb.unit or ra.median <= 0 or rb.median <= 0:
            continue
        out.append((check, ra, pair_value(ra, rb, check in paired, loads.get(check))))
    return out


def evidence(runs: Sequence[SideRun], tolerance: float | None = None) -> dict[str, CheckState]:
    """Each check's log ratios B/A over the rounds whose two readings shared their conditions.

    A load both readings saw (a steady neighbour) slows both and cancels in the ratio: the
    pair is kept, with the load it shared.  A pair whose readings saw different conditions
    (a load that started or stopped between them, a throttled GPU) is left out and listed
    with the reason: the ratio would hold the difference, not the software's.  Where the
    sides took turns sample by sample and each turn's load was measured, that is judged turn
    pair by turn pair (:func:`pair_value`).
    """
    by_round: dict[int, list[SideRun]] = {}
    for run in runs:
        by_round.setdefault(run.round, []).append(run)
    kept: dict[str, list[tuple[int, PairValue]]] = {}
    dropped: dict[str, list[tuple[int, str]]] = {}
    meta: dict[str, Reading] = {}
    for rnd in sorted(by_round):
        for check, ra, value in round_pairs(by_round[rnd]):
            meta[check] = ra
            if value.left_out:
                dropped.setdefault(check, []).append((rnd, value.left_out))
            else:
                kept.setdefault(check, []).append((rnd, value))
    out = {}
    for check in sorted(meta):
        m = meta[check]
        pairs = kept.get(check, [])
        gone = dropped.get(check, [])
        out[check] = CheckState(
            check,
            m.unit,
            m.higher_is_better,
            tolerance if tolerance is not None else m.tolerance,
            tuple(v.value for _, v in pairs),
            tuple(r for r, _ in pairs),
            None,
            tuple(r for r, _ in gone),
            tuple(w for _, w in gone),
            tuple(v.load for _, v in pairs),
            tuple(r for r, v in pairs if v.by_turns),
            sum(v.split for _, v in pairs),
            sum(v.turns for _, v in pairs),
        )
    return out


def judge(states: Mapping[str, CheckState], plan: Plan) -> dict[str, CheckState]:
    """Every check judged as one family (those with two rounds or more)."""
    ready = [s for s in states.values() if len(s.log_ratios) >= 2]
    judged = paired.judge_family(
        [(paired.summarize(s.log_ratios), s.higher_is_better, s.tolerance) for s in ready],
        plan.alpha,
        plan.correction,
    )
    out = dict(states)
    for state, verdict in zip(ready, judged, strict=True):
        out[state.id] = CheckState(**{**state.__dict__, "judged": verdict})
    return out


def verdict(state: CheckState) -> str:
    """The check's verdict, ``unknown`` before it has two rounds."""
    return state.judged.verdict if state.judged else "unknown"


SideRunner = Callable[[str, int, int, Sequence[str] | None], SideRun]
# run_round(round, order, selection, keep): runs both sides of a round, giving each side's
# run to ``keep`` as it ends (so an interrupt loses no finished side).
RoundRunner = Callable[
    [int, tuple[str, str], Sequence[str] | None, Callable[[SideRun], None]], None
]
# progress(round done, rounds cap, undecided checks, seconds left, the round's runs)
Progress = Callable[[int, int, int, float, Sequence[SideRun]], None]


@dataclass
class Session:
    """Every side run so far, and why the rounds stopped."""

    runs: list[SideRun] = field(default_factory=list)
    order: list[tuple[str, str]] = field(default_factory=list)
    stopped: str = ""  # decided, round cap, budget, nothing compared, interrupted
    incomplete: str = ""  # set when the session did not finish (an interrupt)
    states: dict[str, CheckState] = field(default_factory=dict)
    started: float = 0.0
    seconds: float = 0.0


def one_then_the_other(run_side: SideRunner) -> RoundRunner:
    """A round runner that runs one side's process, then the other's, in the round's order."""

    def run_round(
        rnd: int,
        order: tuple[str, str],
        selection: Sequence[str] | None,
        keep: Callable[[SideRun], None],
    ) -> None:
        for position, side in enumerate(order):
            keep(run_side(side, rnd, position, selection))

    return run_round


def short_budget(
    spent_s: float, plan: Plan, pace_s: float | None = None, done: int = 1
) -> tuple[int, float] | None:
    """The rounds a budget holds, where too few to call a change.

    ``done`` rounds took ``spent_s``; the rest will take ``pace_s`` each (default: the
    rounds so far, on average).  The first round pays once for what later rounds reuse (a
    warm side's imports, a STREAM set's first pages), so the pace is best taken from a later
    round; later rounds still run only the undecided checks, so it errs long.

    None where the budget holds the sign-flip guard's minimum of rounds (or where the round
    cap is below it: then no budget helps).  Otherwise the rounds it holds and the budget
    that would hold enough, with a twentieth to spare.
    """
    needed = paired.MIN_SIGN_ROUNDS
    pace = pace_s if pace_s is not None else spent_s / max(done, 1)
    if spent_s <= 0 or pace <= 0 or plan.max_rounds < needed:
        return None
    held = done + int(max(0.0, plan.budget_s - spent_s) // pace)  # the rounds done ran
    if held >= needed:
        return None
    return held, (spent_s + (needed - done) * pace) * 1.05


def run_rounds(
    run_round: RoundRunner,
    plan: Plan,
    progress: Progress | None = None,
    on_round: Callable[[Session], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    selection: Sequence[str] | None = None,
) -> Session:
    """Run rounds until every check is decided, the cap, or the budget.

    ``run_round(round, order, selection, keep)`` runs both sides of a round (``selection``
    None: the whole selection), e.g. :func:`one_then_the_other` or
    :func:`perfsuite.ab.lockstep.lockstep_runner`.  ``on_round`` gets the session after each
    round (to save the record).
    ``selection``: the node ids to run from the first round (None: the whole selection).
    A KeyboardInterrupt ends the rounds; the session so far is returned, marked incomplete.
    """
    session = Session(started=clock())
    sequence = orders(plan.seed)
    selection = list(selection) if selection is not None else None
    last_round_s = 0.0
    last_selected = 0
    try:
        for rnd in range(1, plan.max_rounds + 1):
            elapsed = clock() - session.started
            if rnd > 1:
                share = len(selection) / last_selected if selection and last_selected else 1.0
                expected = last_round_s * share
                if elapsed + expected > plan.budget_s:
                    session.stopped = "budget"
                    break
            order = next(sequence)
            session.order.append(order)
            round_start = clock()
            this_round: list[SideRun] = []

            def keep(run: SideRun, this_round: list[SideRun] = this_round) -> None:
                session.runs.append(run)
                this_round.append(run)

            run_round(rnd, order, selection, keep)
            last_round_s = clock() - round_start
            session.states = judge(evidence(session.runs, plan.tolerance), plan)
            undecided = [c for c, s in session.states.items() if verdict(s) == "unknown"]
            last_selected = len(selection) if selection else max(1, len(session.states))
            left = plan.budget_s - (clock() - session.started)
            if progress:
                progress(rnd, plan.max_rounds, len(undecided), left, this_round)
            if on_round:
                on_round(session)
            if rnd >= plan.min_rounds:
                if not session.states:
                    session.stopped = "nothing compared"  # every round failed, or no check ran
                    break
                if not undecided:
                    session.stopped = "decided"
                    break
                selection = undecided
        else:
            session.stopped = "round cap"
    except KeyboardInterrupt:
        session.stopped = "interrupted"
        session.incomplete = f"interrupted during round {len(session.order)}"
        session.states = judge(evidence(session.runs, plan.tolerance), plan)
    session.seconds = clock() - session.started
    return session
