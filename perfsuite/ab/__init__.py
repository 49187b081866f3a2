"""Interleaved A/B of two whole stacks on one machine (``perfsuite ab``).

The data flow: :mod:`perfsuite.ab.stacks` resolves each side's interpreter (building a cached
environment for a requirement set); :mod:`perfsuite.ab.rounds` runs A and B in fresh
processes, alternated in balanced random order; :mod:`perfsuite.ab.paired` judges each check
on its rounds' log ratios; this module gathers the result and decides the exit status;
:mod:`perfsuite.report.ab` renders it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.ab import paired
from perfsuite.ab.rounds import CheckState, Plan, Session, SideRun, verdict
from perfsuite.ab.stacks import Stack
from perfsuite.judge import outcome
from perfsuite.judge.compare import environment_diff
from perfsuite.store.files import write_text_atomic

SCHEMA = "perfsuite-ab"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CheckVerdict:
    """One check's A/B verdict and its evidence."""

    id: str
    unit: str
    higher_is_better: bool
    tolerance: float
    rounds: tuple[int, ...]
    log_ratios: tuple[float, ...]
    judged: paired.Judged | None
    verdict: str
    below_floor: bool = False  # the node missed this check's floor on both sides
    tainted: tuple[int, ...] = ()  # rounds left out: its two readings saw different conditions
    left_out: tuple[str, ...] = ()  # why, one per round in ``tainted``
    loads: tuple[float, ...] = ()  # the foreign load each judged round's pair shared, in cores
    by_turns: tuple[int, ...] = ()  # rounds judged by their turn pairs' median, not medians
    # Turn pairs left out of the judged rounds because a load started or stopped between
    # their two turns, and the turn pairs those rounds measured (0: not measured by turn).
    turns_split: int = 0
    turns_seen: int = 0

    @property
    def ratio(self) -> float | None:
        """Geometric mean of B/A over the rounds."""
        return self.judged.pairs.ratio if self.judged else None

    @property
    def speed(self) -> float:
        """Oriented log ratio (positive: B better); 0 before it is judged."""
        return self.judged.speed if self.judged else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        j = self.judged
        return {
            "id": self.id,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "tolerance": self.tolerance,
            "rounds": list(self.rounds),
            "log_ratios": list(self.log_ratios),
            "verdict": self.verdict,
            "below_floor": self.below_floor,
            "tainted_rounds": list(self.tainted),
            "left_out": list(self.left_out),
            "shared_loads": [round(x, 3) for x in self.loads],
            "turn_pair_rounds": list(self.by_turns),
            "turn_pairs_split": self.turns_split,
            "turn_pairs_seen": self.turns_seen,
            "ratio": self.ratio,
            "ci_low": _exp(j.pairs.low) if j else None,
            "ci_high": _exp(j.pairs.high) if j else None,
            "p_value": j.pairs.p if j else None,
            "p_signs": j.pairs.p_signs if j else None,
            "significant": j.significant if j else None,
            "ruled_out": j.ruled_out if j and j.ruled_out != float("inf") else None,
            "rounds_needed": j.rounds_needed if j else None,
        }


def _exp(x: float) -> float | None:
    return math.exp(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Outcome:
    """Everything an A/B found, for the record and the reports."""

    run_id: str
    created: str
    stacks: Mapping[str, Stack]
    fingerprints: Mapping[str, Mapping[str, Any]]
    diff: tuple[tuple[str, Any, Any], ...]
    same_stack: bool
    plan: Plan
    pytest_args: tuple[str, ...]
    side_args: tuple[str, ...]
    session: Session
    checks: tuple[CheckVerdict, ...]
    only_in: Mapping[str, tuple[str, ...]]
    unhealthy: tuple[str, ...]  # checks whose floor the node missed on both sides
    broken: tuple[str, ...]  # checks A measured and B crashed on
    fail_on: frozenset[str]
    exit_status: int
    record: Path | None = None
    html: Path | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    test: str = paired.TEST  # the test the rounds were judged by (a record keeps its own)

    def worst_first(self) -> list[CheckVerdict]:
        """Regressed first, then unknown, same, improved; each by its change, worst first."""
        rank = {"regressed": 0, "unknown": 1, "same": 2, "improved": 3}
        return sorted(self.checks, key=lambda c: (rank.get(c.verdict, 1), c.speed))

    def counts(self) -> dict[str, int]:
        """How many checks got each verdict."""
        out = dict.fromkeys(paired.VERDICTS, 0)
        for c in self.checks:
            out[c.verdict] = out.get(c.verdict, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """The A/B record: both stacks, every round's samples, the order, test and verdicts."""
        s = self.session
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "created": self.created,
            "incomplete": s.incomplete,
            "stopped": s.stopped,
            "seconds": round(s.seconds, 1),
            "exit_status": self.exit_status,
            "stacks": {k: v.to_dict() for k, v in self.stacks.items()},
            "fingerprints": {k: dict(v) for k, v in self.fingerprints.items()},
            "environment_diff": [list(row) for row in self.diff],
            "same_stack": self.same_stack,
            "test": self.test,
            "confidence": paired.CONFIDENCE,
            "correction": self.plan.correction,
            "alpha": self.plan.alpha,
            "plan": {
                "min_rounds": self.plan.min_rounds,
                "max_rounds": self.plan.max_rounds,
                "budget_s": self.plan.budget_s,
                "tolerance": self.plan.tolerance,
                "seed": self.plan.seed,
                "interleave": self.plan.interleave,
            },
            "fail_on": sorted(self.fail_on),
            "pytest_args": list(self.pytest_args),
            "side_args": list(self.side_args),
            "order": ["".join(o) for o in s.order],
            "rounds": [r.to_dict() for r in s.runs],
            "checks": [c.to_dict() for c in self.worst_first()],
            "only_in": {k: list(v) for k, v in self.only_in.items()},
            "unhealthy": list(self.unhealthy),
            "broken_by_b": list(self.broken),
            "notes": list(self.notes),
        }


def floors_missed(runs: Sequence[SideRun], side: str) -> set[str]:
    """Checks whose floor failed in more than half of a side's runs that measured them."""
    seen: dict[str, list[bool]] = {}
    for run in runs:
        if run.side == side and not run.failed:
            for check, reading in run.readings.items():
                if not reading.flags:  # a floor missed under load says nothing of the node
                    seen.setdefault(check, []).append(reading.floor == "fail")
    return {c for c, fails in seen.items() if sum(fails) * 2 > len(fails)}


def measured(runs: Sequence[SideRun], side: str) -> set[str]:
    """Checks a side measured in any round."""
    return {c for r in runs if r.side == side and not r.failed for c in r.readings}


def broken_by_b(runs: Sequence[SideRun]) -> tuple[str, ...]:
    """Checks that A measured and B crashed on (raised, timed out, lost its worker)."""
    crashed_b = {c for r in runs if r.side == "B" for c in r.crashed}
    return tuple(sorted(crashed_b & measured(runs, "A")))


def decide_exit(
    checks: Sequence[CheckVerdict],
    incomplete: str,
    fail_on: frozenset[str],
    broken: Sequence[str] = (),
) -> int:
    """The one place the A/B exit status is decided.

    ``EXIT_REGRESSED``: a verdict named by ``fail_on`` (default: regressed), unless the node
    was below the check's floor on both sides (a statement about the node, not the
    software), or a check that A measures and B crashes on, hangs on or dies in
    (``broken``): a failure of B, never a pass for want of evidence.  As the plugin's
    session verdict does, a failure found is a failure however the session ended.
    ``EXIT_INTERRUPTED``: none, and the session was interrupted.  ``EXIT_INCONCLUSIVE``:
    some checks are undecided, or nothing was compared.  ``EXIT_OK`` otherwise.
    """
    if broken or any(c.verdict in fail_on and not c.below_floor for c in checks):
        return outcome.EXIT_REGRESSED
    if incomplete:
        return outcome.EXIT_INTERRUPTED
    if not checks or any(c.verdict == "unknown" or c.below_floor for c in checks):
        return outcome.EXIT_INCONCLUSIVE
    return outcome.EXIT_OK


def gather(
    states: Mapping[str, CheckState], runs: Sequence[SideRun]
) -> tuple[tuple[CheckVerdict, ...], dict[str, tuple[str, ...]], tuple[str, ...]]:
    """The checks' verdicts, the checks only one side measured, and the unhealthy checks."""
    below = floors_missed(runs, "A") & floors_missed(runs, "B")
    checks = tuple(
        CheckVerdict(
            s.id,
            s.unit,
            s.higher_is_better,
            s.tolerance,
            s.rounds,
            s.log_ratios,
            s.judged,
            verdict(s),
            s.id in below,
            s.tainted,
            s.left_out,
            s.loads,
            s.by_turns,
            s.turns_split,
            s.turns_seen,
        )
        for s in states.values()
    )
    a, b = measured(runs, "A"), measured(runs, "B")
    only_in = {"A": tuple(sorted(a - b)), "B": tuple(sorted(b - a))}
    return checks, only_in, tuple(sorted(below))


def first_environment(runs: Sequence[SideRun], side: str) -> Mapping[str, Any]:
    """The environment fingerprint of a side's first run that wrote one."""
    for run in runs:
        if run.side == side and run.environment:
            return run.environment
    return {}


def side_diff(
    fa: Mapping[str, Any],
    fb: Mapping[str, Any],
    env_a: Mapping[str, str],
    env_b: Mapping[str, str],
    requirements: tuple[Sequence[str], Sequence[str]] = ((), ()),
) -> tuple[tuple[str, Any, Any], ...]:
    """The environment diff of the two sides, with the variables each side was given.

    ``requirements``: what each side's environment was built with: a package pinned
    differently (the bisected one) differs, whether or not the fingerprint lists it.
    """
    rows = list(environment_diff(fa, fb)) if fa and fb else []
    keys = {row[0] for row in rows}
    for name in sorted(env_a.keys() | env_b.keys()):
        key = f"side variable {name}"
        if env_a.get(name) != env_b.get(name) and key not in keys:
            rows.append((key, env_a.get(name), env_b.get(name)))
    rows += requirement_diff(*requirements)
    return tuple(rows)


def requirement_diff(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, Any, Any]]:
    """The packages two requirement sets pin differently: ``("requirement x", "x==1", "x==2")``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    def by_name(reqs: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for text in reqs:
            try:
                out[canonicalize_name(Requirement(text).name)] = text
            except InvalidRequirement:
                out[text] = text
        return out

    ma, mb = by_name(a), by_name(b)
    return [
        (f"requirement {name}", ma.get(name), mb.get(name))
        for name in sorted(ma.keys() | mb.keys())
        if ma.get(name) != mb.get(name)
    ]


def unfingerprinted(fingerprints: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    """The sides that gave no environment fingerprint (their environments cannot be compared)."""
    return tuple(side for side in ("A", "B") if not fingerprints.get(side))


def new_run_id() -> tuple[str, str]:
    """A sortable id and the UTC creation time."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}", now.isoformat()


def save(result: Outcome, path: Path) -> Path:
    """Write the record atomically (a reader never sees half of it)."""
    return write_text_atomic(path, json.dumps(result.to_dict(), indent=1, default=str) + "\n")
