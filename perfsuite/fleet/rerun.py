"""Which nodes a fleet reruns, and the commands that rerun them and judge the rerun.

One run's flags are unconfirmed: its candidates (slow nodes) and the nodes slow only at
readings their own runs flagged are run again, into ``DIR/confirm``, then ``confirm-2``;
after a rerun, those it left unsettled and those confirmed by fewer than
:data:`CONFIRMATIONS` reruns.  A rerun's verdict on a candidate is led by one of its checks
(:func:`lead_check`).  The report words these; this module only chooses them.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from perfsuite.fleet import judge as fj
from perfsuite.fleet.aggregate import CONFIRM_DIR, Unit
from perfsuite.fleet.assess import Fleet, ProfileFleet
from perfsuite.fleet.options import DEFAULT_TIMEOUT_S


def slow_rows(fleet: Fleet) -> list[tuple[ProfileFleet, fj.SlowUnit]]:
    """Every flagged unit of every profile, worst first."""
    rows = [(p, s) for p in fleet.profiles for s in p.slow]
    return sorted(rows, key=lambda ps: (ps[1].worst_ratio, ps[1].worst_z))


def rerun_rows(fleet: Fleet) -> list[tuple[ProfileFleet, fj.RerunUnit]]:
    """Every unit to rerun of every profile, worst first (unjudged ones last)."""
    rows = [(p, r) for p in fleet.profiles for r in p.rerun]
    return sorted(rows, key=lambda pr: (math.isnan(pr[1].worst_ratio), pr[1].worst_ratio))


AGAIN = (fj.Verdict.RERUN, fj.Verdict.MISSING)  # a rerun of these may settle them


# The reruns that settle a drain: with heavy-tailed noise a large fleet's healthy node is
# now and then confirmed by one rerun, seldom by two (lab/measurements.md, 2026-11-28).
CONFIRMATIONS = 2


def node_name(unit: Unit) -> str:
    """How Slurm and a hostfile name a unit's node: its host's short name, else its label."""
    return unit.node


def confirm_again(fleet: Fleet) -> list[tuple[ProfileFleet, fj.Rechecked]]:
    """The drained candidates fewer than ``CONFIRMATIONS`` reruns confirmed, worst first."""
    rows = rechecked_rows(fleet, fj.Verdict.CONFIRMED)
    return [(p, r) for p, r in rows if r.confirmations < CONFIRMATIONS]


def rerun_hosts(fleet: Fleet) -> list[str]:
    """The nodes to run again: the candidates (unconfirmed), else the ones left to rerun.

    After a rerun, those are the candidates it left unsettled, and those confirmed by fewer
    than ``CONFIRMATIONS`` reruns.
    """
    if fleet.confirmed:
        units = [(p, r.unit) for p in fleet.profiles for r in p.verdict_of(*AGAIN)]
        units += [(p, r.unit) for p, r in confirm_again(fleet)]
    else:
        units = [(p, s.unit) for p in fleet.profiles for s in p.slow]
        units += [(p, r.unit) for p in fleet.profiles for r in p.rerun]
    return sorted({node_name(p.matrix.units[u]) for p, u in units})


def next_confirm_dir(fleet: Fleet) -> Path:
    """Where the next rerun goes: ``DIR/confirm``, then ``DIR/confirm-2``, ..."""
    k = len(fleet.confirm)
    return fleet.directory / (CONFIRM_DIR if not k else f"{CONFIRM_DIR}-{k + 1}")


def rerun_commands(fleet: Fleet) -> list[str]:
    """The commands that run the nodes of :func:`rerun_hosts` again and judge that rerun.

    The first run's options come from its ``fleet-run.json``; without it, ``PYTEST_ARGS``
    stands for its pytest arguments.
    """
    hosts = rerun_hosts(fleet)
    if not hosts:
        return []
    target = next_confirm_dir(fleet)
    run = ["perfsuite", "fleet", "run", "--nodelist", ",".join(hosts), "--dir", str(target)]
    a = fleet.asked
    if a is None:
        run_text = shlex.join(run) + " -- PYTEST_ARGS"
    else:
        run += ["--tasks-per-node", str(a.tasks_per_node)] if a.tasks_per_node != 1 else []
        run += ["--timeout", f"{a.timeout_s:g}"] if a.timeout_s != DEFAULT_TIMEOUT_S else []
        run += ["--hostfile", str(a.hostfile)] if a.hostfile is not None else []
        run += [f"--launcher-arg={x}" for x in a.launcher_args]
        run_text = shlex.join([*run, "--", *a.pytest_args])
    report = ["perfsuite", "fleet", "report", str(fleet.directory)]
    for d in (*fleet.confirm, target):
        report += ["--confirm", str(d)]
    default = fj.Rule()
    r = fleet.rule
    report += ["--alpha", f"{r.alpha:g}"] if r.alpha != default.alpha else []
    report += ["--tolerance", f"{r.tolerance:g}"] if r.tolerance != default.tolerance else []
    report += ["--min-spread", f"{r.min_spread:g}"] if r.min_spread != default.min_spread else []
    return [run_text, shlex.join(report)]


def rechecked_rows(fleet: Fleet, *verdicts: fj.Verdict) -> list[tuple[ProfileFleet, fj.Rechecked]]:
    """The candidates of every profile whose rerun gave one of ``verdicts``, worst first."""
    rows = [(p, r) for p in fleet.profiles for r in p.verdict_of(*verdicts)]
    return sorted(rows, key=lambda pr: (math.isnan(pr[1].worst_ratio), pr[1].worst_ratio))


# The cell that gives a candidate its verdict.
_LEAD = {
    fj.Verdict.CONFIRMED: fj.Recheck.CONFIRMED,
    fj.Verdict.RERUN: fj.Recheck.RERUN,
    fj.Verdict.MISSING: fj.Recheck.MISSING,
    fj.Verdict.UNJUDGED: fj.Recheck.UNJUDGED,
}


def lead_check(p: ProfileFleet, r: fj.Rechecked) -> int:
    """The check that gives the candidate its verdict (its worst, when cleared)."""
    c = p.confirmation
    assert c is not None
    cell = _LEAD.get(r.verdict)
    found = [k for k in r.checks if cell is None or c.state[r.unit, k] == cell]
    return found[0]


def lead_first(r: fj.Rechecked, lead: int) -> list[int]:
    """A candidate's checks, the one that gives its verdict first."""
    return [lead, *(k for k in r.checks if k != lead)]
