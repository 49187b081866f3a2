"""An A/B's record (``ab.json``) read back into the :class:`perfsuite.ab.Outcome` it holds.

``perfsuite ab`` writes the record after every round; ``perfsuite report ab.json`` renders
its page again from it (:mod:`perfsuite.report.ab`).  Each check's interval and p-value are
recomputed from the rounds' log ratios by the same summary the A/B judged them with, and
must agree with what the record says; the verdicts, the family's correction and the exit
status are read as recorded, never decided again.  A field added to the record after its
first version reads as its default where an older record lacks it.  A record that is not
whole, or was edited into disagreement with itself, is refused with the field that is
wrong.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from perfsuite.ab import SCHEMA, SCHEMA_VERSION, CheckVerdict, Outcome, paired
from perfsuite.ab.rounds import INTERLEAVES, Plan, Reading, Session, SideRun, TurnLoad
from perfsuite.ab.stacks import Stack
from perfsuite.errors import StorageError
from perfsuite.store.files import check_schema_version, read_json

T = TypeVar("T")
# How far a recomputed interval or p-value may sit from the recorded one (rounding).
AGREE = 1e-6
# The largest |ln(B/A)| of a round a record may hold: a side e^10 (22,000) times faster is
# no measurement, and the interval of a few such rounds would reach past a float's range.
MAX_LOG_RATIO = 10.0
# The most rounds a record may hold: each check's p-value is recomputed, and past 16 rounds
# that draws 65,536 sign patterns a round (a hostile file of 10^4 rounds would ask for GBs).
MAX_ROUNDS = 1000
# The largest figure a turn pair's load may hold (cores, or seconds of a turn's wall time).
MAX_TURN_FIGURE = 1e6


class _Bad(Exception):
    """A field of the record that is missing or of the wrong kind."""


def _field(data: Any, key: str, kind: type[T] | tuple[type, ...], where: str) -> T:
    if not isinstance(data, Mapping) or key not in data:
        raise _Bad(f"{where}: no {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind not in (bool, (bool,))):
        raise _Bad(f"{where}.{key}: expected {_kind_name(kind)}, found {value!r}")
    return value  # type: ignore[return-value]


def _field_int(data: Any, key: str, where: str) -> int:
    return _field(data, key, int, where)


def _text(data: Any, key: str, where: str) -> str:
    return _field(data, key, str, where)


def _flag(data: Any, key: str, where: str) -> bool:
    return _field(data, key, bool, where)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _number(data: Any, key: str, where: str) -> float:
    value: float = _field(data, key, (int, float), where)
    try:
        return float(value)
    except OverflowError:
        raise _Bad(f"{where}.{key}: {value!r} is past a float's range") from None


def _optional(data: Any, key: str, read: Callable[[Any, str, str], T], where: str) -> T | None:
    if not isinstance(data, Mapping) or data.get(key) is None:
        return None
    return read(data, key, where)


def _later(data: Any, key: str, read: Callable[[Any, str, str], T], where: str, default: T) -> T:
    """A field records written before it existed lack: its default there."""
    if isinstance(data, Mapping) and key not in data:
        return default
    return read(data, key, where)


def _strings(data: Any, key: str, where: str) -> tuple[str, ...]:
    values = _field(data, key, list, where)
    if not all(isinstance(v, str) for v in values):
        raise _Bad(f"{where}.{key}: not a list of strings")
    return tuple(values)


def _numbers(data: Any, key: str, where: str) -> tuple[float, ...]:
    values = _field(data, key, list, where)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise _Bad(f"{where}.{key}: not a list of numbers")
    try:
        return tuple(float(v) for v in values)
    except OverflowError:
        raise _Bad(f"{where}.{key}: a number past a float's range") from None


def _ints(data: Any, key: str, where: str) -> tuple[int, ...]:
    values = _field(data, key, list, where)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise _Bad(f"{where}.{key}: not a list of integers")
    return tuple(values)


def _reading(data: Any, where: str) -> Reading:
    samples = _numbers(data, "samples", where)
    if not samples:
        raise _Bad(f"{where}.samples: empty")
    return Reading(
        unit=_field(data, "unit", str, where),
        higher_is_better=_field(data, "higher_is_better", bool, where),
        tolerance=_number(data, "tolerance", where),
        samples=samples,
        floor=_field(data, "floor", str, where),
        flags=_later(data, "flags", _strings, where, ()),
        load=_optional(data, "load", _number, where),
        states=_later(data, "states", _strings, where, ()),
    )


def _side_run(data: Any, where: str) -> SideRun:
    readings = _field(data, "readings", dict, where)
    return SideRun(
        round=_field(data, "round", int, where),
        side=_side(data, where),
        position=_field(data, "position", int, where),
        seconds=_number(data, "seconds", where),
        returncode=_optional(data, "returncode", _field_int, where),
        failed=_field(data, "failed", str, where),
        readings={
            str(check): _reading(r, f"{where}.readings[{check!r}]") for check, r in readings.items()
        },
        crashed=_later(data, "crashed", _strings, where, ()),
        record=_later(data, "record", _text, where, ""),
        log=_later(data, "log", _text, where, ""),
        output_tail=_later(data, "output_tail", _text, where, ""),
        selected=_later(data, "selected", _field_int, where, 0),
        waited=_later(data, "waited", _number, where, 0.0),
        forked=_later(data, "forked", _flag, where, False),
        turn_pairs=_later(data, "turn_pairs", _strings, where, ()),
        turn_loads=_later(data, "turn_loads", _turn_loads, where, {}),
    )


def _turn_loads(data: Any, key: str, where: str) -> dict[str, tuple[TurnLoad, ...]]:
    """Each turn-paired check's turn pairs' loads: ``[a cores, b cores, wall s]`` a pair."""
    loads = _field(data, key, dict, where)
    out = {}
    for check, pairs in loads.items():
        at = f"{where}.{key}[{check!r}]"
        if not isinstance(pairs, list) or not all(
            isinstance(p, list)
            and len(p) == 3
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            and all(math.isfinite(v) and 0 <= v <= MAX_TURN_FIGURE for v in p)
            for p in pairs
        ):
            raise _Bad(f"{at}: not a list of [A cores, B cores, wall s] of finite figures")
        out[str(check)] = tuple(TurnLoad(float(a), float(b), float(w)) for a, b, w in pairs)
    return out


def _side(data: Any, where: str) -> str:
    side = _field(data, "side", str, where)
    if side not in ("A", "B"):
        raise _Bad(f"{where}.side: {side!r} is neither A nor B")
    return side


def _check(data: Any, where: str, most: int) -> CheckVerdict:
    """One check's verdict; ``most``: the rounds the record ran (no check has more)."""
    verdict = _field(data, "verdict", str, where)
    if verdict not in paired.VERDICTS:
        raise _Bad(f"{where}.verdict: {verdict!r} is not one of {', '.join(paired.VERDICTS)}")
    hib = _field(data, "higher_is_better", bool, where)
    tolerance = _number(data, "tolerance", where)
    log_ratios = _numbers(data, "log_ratios", where)
    rounds = _ints(data, "rounds", where)
    if len(rounds) != len(log_ratios):
        raise _Bad(f"{where}: {len(rounds)} rounds for {len(log_ratios)} log ratios")
    if len(log_ratios) > most:
        raise _Bad(f"{where}: {len(log_ratios)} log ratios from a record of {most} rounds")
    if any(abs(x) > MAX_LOG_RATIO for x in log_ratios):
        raise _Bad(f"{where}.log_ratios: a round's B/A beyond e^{MAX_LOG_RATIO:g} either way")
    judged = None
    if _optional(data, "ratio", _number, where) is not None:
        if not log_ratios:
            raise _Bad(f"{where}: a ratio without the rounds' log ratios it came from")
        pairs = paired.summarize(log_ratios)
        for key, value in (
            ("ratio", pairs.mean),
            ("ci_low", pairs.low),
            ("ci_high", pairs.high),
        ):
            _agrees(data, where, key, math.exp(value) if math.isfinite(value) else math.nan)
        _agrees(data, where, "p_value", pairs.p)
        ruled_out = _optional(data, "ruled_out", _number, where)
        judged = paired.Judged(
            pairs,
            hib,
            tolerance,
            _field(data, "significant", bool, where),
            verdict,
            math.inf if ruled_out is None else ruled_out,
            _optional(data, "rounds_needed", _field_int, where),
        )
    split = _later(data, "turn_pairs_split", _field_int, where, 0)
    seen = _later(data, "turn_pairs_seen", _field_int, where, 0)
    if not 0 <= split <= seen:
        raise _Bad(f"{where}: {split} turn pairs split of {seen} seen")
    return CheckVerdict(
        id=_field(data, "id", str, where),
        unit=_field(data, "unit", str, where),
        higher_is_better=hib,
        tolerance=tolerance,
        rounds=rounds,
        log_ratios=log_ratios,
        judged=judged,
        verdict=verdict,
        below_floor=_later(data, "below_floor", _flag, where, False),
        tainted=_later(data, "tainted_rounds", _ints, where, ()),
        left_out=_later(data, "left_out", _strings, where, ()),
        loads=_later(data, "shared_loads", _numbers, where, ()),
        by_turns=_later(data, "turn_pair_rounds", _ints, where, ()),
        turns_split=split,
        turns_seen=seen,
    )


def _agrees(data: Mapping[str, Any], where: str, key: str, value: float) -> None:
    """The recorded figure is the one its rounds give (a hand edit would not be)."""
    recorded = _optional(data, key, _number, where)
    if recorded is None or not math.isfinite(value):
        return
    if not math.isclose(recorded, value, rel_tol=AGREE, abs_tol=AGREE):
        raise _Bad(f"{where}.{key}: {recorded!r}, but its rounds' log ratios give {value!r}")


def _stack(data: Any, where: str) -> Stack:
    spec = _field(data, "spec", str, where)
    env: dict[str, Any] = _later(data, "env", lambda d, k, w: _field(d, k, dict, w), where, {})
    if not all(isinstance(v, str) for v in env.values()):
        raise _Bad(f"{where}.env: not a map of strings")
    return Stack(
        spec=spec,
        kind=_field(data, "kind", str, where),
        python=_field(data, "python", str, where),
        requirements=_later(data, "requirements", _strings, where, ()),
        built_s=_later(data, "built_s", _number, where, 0.0),
        cached=_later(data, "cached", _flag, where, False),
        env=tuple((str(k), v) for k, v in env.items()),
    )


def _plan(data: Mapping[str, Any]) -> Plan:
    plan = _field(data, "plan", dict, "record")
    # Before the sides took turns, each side's process ran all its checks, then the other's.
    interleave = _later(plan, "interleave", _text, "plan", "processes")
    if interleave not in INTERLEAVES:
        raise _Bad(f"plan.interleave: {interleave!r} is not one of {', '.join(INTERLEAVES)}")
    tolerance = _optional(plan, "tolerance", _number, "plan")
    seed = _optional(plan, "seed", _field_int, "plan")
    try:
        return Plan(
            min_rounds=_field(plan, "min_rounds", int, "plan"),
            max_rounds=_field(plan, "max_rounds", int, "plan"),
            budget_s=_number(plan, "budget_s", "plan"),
            alpha=_number(data, "alpha", "record"),
            correction=_field(data, "correction", str, "record"),
            tolerance=tolerance,
            seed=seed,
            interleave=interleave,
        )
    except ValueError as exc:
        raise _Bad(f"plan: {exc}") from None


def _order(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    order = []
    pairs = _strings(data, "order", "record")
    if len(pairs) > MAX_ROUNDS:
        raise _Bad(f"order: {len(pairs)} rounds, more than the {MAX_ROUNDS} a record may hold")
    for pair in pairs:
        if sorted(pair) != ["A", "B"]:
            raise _Bad(f"order: {pair!r} is not AB or BA")
        order.append((pair[0], pair[1]))
    return order


def _diff(data: Mapping[str, Any]) -> tuple[tuple[str, Any, Any], ...]:
    rows = _field(data, "environment_diff", list, "record")
    if not all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) for r in rows):
        raise _Bad("environment_diff: not a list of [key, A, B] rows")
    return tuple((r[0], r[1], r[2]) for r in rows)


def _listed(data: Mapping[str, Any], key: str, read: Callable[[Any, str], T]) -> list[T]:
    return [read(item, f"{key}[{i}]") for i, item in enumerate(_field(data, key, list, "record"))]


def _checks(data: Mapping[str, Any], rounds: int) -> tuple[CheckVerdict, ...]:
    return tuple(_listed(data, "checks", lambda item, where: _check(item, where, rounds)))


def outcome_of(data: Mapping[str, Any]) -> Outcome:
    """The A/B a record's data holds; raises ``_Bad`` naming the first field that is wrong."""
    if data.get("schema") != SCHEMA:
        raise _Bad(f"schema is {data.get('schema')!r}, not {SCHEMA!r}")
    stacks = _field(data, "stacks", dict, "record")
    fingerprints = _field(data, "fingerprints", dict, "record")
    only_in = _field(data, "only_in", dict, "record")
    status = _field(data, "exit_status", int, "record")
    order = _order(data)
    session = Session(
        runs=_listed(data, "rounds", _side_run),
        order=order,
        stopped=_field(data, "stopped", str, "record"),
        incomplete=_field(data, "incomplete", str, "record"),
        seconds=_number(data, "seconds", "record"),
    )
    return Outcome(
        run_id=_field(data, "run_id", str, "record"),
        created=_field(data, "created", str, "record"),
        stacks={side: _stack(stacks.get(side), f"stacks.{side}") for side in ("A", "B")},
        fingerprints={
            side: _field(fingerprints, side, dict, "fingerprints")
            for side in ("A", "B")
            if side in fingerprints
        },
        diff=_diff(data),
        same_stack=_field(data, "same_stack", bool, "record"),
        plan=_plan(data),
        pytest_args=_strings(data, "pytest_args", "record"),
        side_args=_strings(data, "side_args", "record"),
        session=session,
        checks=_checks(data, len(order)),
        only_in={side: _strings(only_in, side, "only_in") for side in ("A", "B")},
        unhealthy=_later(data, "unhealthy", _strings, "record", ()),
        broken=_later(data, "broken_by_b", _strings, "record", ()),
        fail_on=frozenset(_strings(data, "fail_on", "record")),
        exit_status=status,
        notes=_later(data, "notes", _strings, "record", ()),
        test=_later(data, "test", _text, "record", paired.TEST),
    )


def is_ab_record(data: Mapping[str, Any]) -> bool:
    """Whether parsed JSON says it is an A/B record."""
    return data.get("schema") == SCHEMA


def read_outcome(path: Path, data: Mapping[str, Any] | None = None) -> Outcome:
    """The A/B an ``ab.json`` holds (``data``: its JSON, where already read).

    Raises :class:`perfsuite.errors.StorageError` for a file that is not a whole A/B record
    of a version this perfsuite reads, naming the field that is wrong.
    """
    if data is None:
        data = read_json(path, "A/B record", SCHEMA_VERSION)
    check_schema_version(data, path, "A/B record", SCHEMA_VERSION)
    try:
        result = outcome_of(data)
    except _Bad as exc:
        raise StorageError(f"{path}: not a whole A/B record: {exc} (file left untouched)") from None
    return dataclasses.replace(result, record=path)
