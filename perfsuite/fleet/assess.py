"""A fleet's directory read and judged: each profile's matrix beside its judgement.

Only this module joins the store (:mod:`perfsuite.fleet.aggregate`, the task statuses) to the
judge (:mod:`perfsuite.fleet.judge`); the reports read what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfsuite import outcome
from perfsuite.errors import PerfsuiteError
from perfsuite.fleet import aggregate, judge
from perfsuite.fleet.status import NodeStatus, read_statuses


@dataclass(frozen=True)
class ProfileFleet:
    """One hardware profile's units, judged only against each other."""

    matrix: aggregate.Matrix
    judgement: judge.Judgement
    slow: tuple[judge.SlowUnit, ...]
    rerun: tuple[judge.RerunUnit, ...]  # to measure again; none of them flagged

    @property
    def judged(self) -> bool:
        """Whether enough units share this profile to judge any of them."""
        return len(self.matrix.units) >= judge.MIN_UNITS


@dataclass(frozen=True)
class Fleet:
    """Everything ``perfsuite fleet report`` shows."""

    directory: Path
    rule: judge.Rule
    profiles: tuple[ProfileFleet, ...]
    failed: tuple[NodeStatus, ...]  # tasks of the fleet run that wrote no record

    @property
    def nodes(self) -> int:
        """Distinct nodes with a record."""
        return len({u.label for p in self.profiles for u in p.matrix.units})

    @property
    def flagged(self) -> int:
        """Units flagged slow, over every profile."""
        return sum(len(p.slow) for p in self.profiles)

    @property
    def rerun(self) -> int:
        """Units to measure again (their slow-looking readings were tainted), none flagged."""
        return sum(len(p.rerun) for p in self.profiles)

    @property
    def exit_status(self) -> int:
        """1 when a node is flagged or failed; else 3 when one must be rerun; else 0.

        3 is the CLI's "inconclusive": a fleet with a reading it could not judge is no pass.
        """
        if self.flagged or self.failed:
            return outcome.EXIT_REGRESSED
        return outcome.EXIT_INCONCLUSIVE if self.rerun else outcome.EXIT_OK


def assess(directory: Path, rule: judge.Rule, workers: int | None = None) -> Fleet:
    """Read the fleet's records and task statuses under ``directory``, and judge them."""
    matrices = aggregate.load(directory, workers)
    labels = sorted({u.label for m in matrices for u in m.units})
    if len(labels) == 1 and max(len(m.units) for m in matrices) < judge.MIN_UNITS:
        raise PerfsuiteError(
            f"{directory}: a fleet of one node ({labels[0]}): nothing to compare it with; "
            f"a fleet report needs {judge.MIN_UNITS} or more nodes of one profile"
        )
    if all(len(m.units) < judge.MIN_UNITS for m in matrices):
        sizes = ", ".join(f"{len(m.units)} of {m.profile}" for m in matrices)
        raise PerfsuiteError(
            f"{directory}: too few nodes to tell a slow one ({sizes}); a fleet is judged "
            f"profile by profile and needs {judge.MIN_UNITS} or more nodes of one profile"
        )
    profiles = []
    for m in matrices:
        j = judge.judge(m.values, m.higher_is_better, m.within, rule, m.tainted)
        profiles.append(ProfileFleet(m, j, tuple(judge.slow_units(j)), tuple(judge.rerun_units(j))))
    failed = tuple(s for s in read_statuses(directory) if s.failed)
    return Fleet(directory, rule, tuple(profiles), failed)
