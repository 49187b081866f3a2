"""The fleet's reports in words: the terminal list of slow nodes, and each drain entry's reason.

Every sentence about a fleet verdict is written here, from the typed results of
:mod:`perfsuite.fleet.assess`; :mod:`perfsuite.report.fleet_page` draws the page with them,
:mod:`perfsuite.fleet.rerun` chooses the nodes to rerun and their commands, and
:mod:`perfsuite.fleet.drain` lists them for schedulers (``drain.json``).

Nodes whose slow-looking readings their own runs flagged (foreign load, a throttled GPU) are
never drained: they are listed to rerun, in the terminal, on the page and in the drain
list's ``rerun`` entries.

One run's flags are unconfirmed: the report says so, and prints the commands that rerun the
candidates and judge the rerun.  With ``--confirm``, the confirmed nodes are drained, those
not confirmed are listed apart (``not_confirmed``), and those whose rerun settled nothing are
listed to rerun again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfsuite.fleet import judge as fj
from perfsuite.fleet.aggregate import Matrix
from perfsuite.fleet.assess import Fleet, ProfileFleet
from perfsuite.fleet.digests import Taint, throttle_reasons
from perfsuite.fleet.rerun import (
    AGAIN,
    CONFIRMATIONS,
    confirm_again,
    lead_check,
    lead_first,
    node_name,
    rechecked_rows,
    rerun_commands,
    rerun_hosts,
    rerun_rows,
    slow_rows,
)
from perfsuite.fleet.status import NodeStatus, where
from perfsuite.model import BASELINE_VERDICTS, FLOOR_VERDICTS
from perfsuite.report.terminal import format_table, short_id

# Slow nodes the terminal names, worst first (all of them are in the drain list).
TERMINAL_ROWS = 40
_FAIL = FLOOR_VERDICTS.index("fail")
_REGRESSED = BASELINE_VERDICTS.index("regressed")


@dataclass(frozen=True)
class NodeHealth:
    """A unit's own verdicts: the checks below their floors, and the baseline regressions."""

    name: str
    below_floor: tuple[str, ...]
    regressed: tuple[str, ...]


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def times(ratio: float) -> str:
    return f"{ratio:.2f}x"


def taint_text(p: ProfileFleet, unit: int, col: int) -> str:
    """Why the unit's own run flagged its reading of a check, in words."""
    return _taint_words(p.matrix, unit, col)


def _taint_words(m: Matrix, unit: int, col: int) -> str:
    taint = Taint(int(m.taint[unit, col]))
    words = []
    if Taint.FOREIGN_LOAD in taint:
        cores = float(m.foreign_cores[unit, col])
        amount = f" ({cores:.2f} cores of other work or steal)" if math.isfinite(cores) else ""
        words.append(f"under foreign load{amount}")
    if Taint.GPU_THROTTLED in taint:
        reasons = throttle_reasons(int(m.throttle[unit, col]))
        words.append("a GPU throttled" + (f" ({', '.join(reasons)})" if reasons else ""))
    if Taint.OTHER in taint:
        words.append("another noise flag of its run (see its record)")
    return "; ".join(words)


def rerun_cell(p: ProfileFleet, unit: int, col: int) -> str:
    ratio = float(p.judgement.ratio[unit, col])
    where = (
        times(ratio)
        if math.isfinite(ratio)
        else f"not judged without it (fewer than {fj.MIN_UNITS} untainted)"
    )
    return f"{short_id(p.matrix.checks[col].id)} {where}"


def rerun_flags(p: ProfileFleet, r: fj.RerunUnit) -> str:
    """Each distinct reason its run flagged the readings to rerun, once."""
    return "; ".join(dict.fromkeys(taint_text(p, r.unit, c) for c in r.checks))


def rule_line(fleet: Fleet) -> str:
    """How the fleet is judged, with the false-alarm guarantee."""
    r = fleet.rule
    return (
        f"rule: a node is slow at a check when its robust z (log figure minus the fleet "
        f"median, over 1.4826 x MAD, floored at {r.min_spread:.0%}) is significant under "
        f"Holm's correction over every node x check of its profile at alpha {r.alpha:g} "
        f"(one-sided Student-t tails, of the degrees of freedom the MAD is worth: a healthy "
        f"fleet of any size raises a false alarm in about {r.alpha:.0%} of reports), and it "
        f"misses the fleet median by more than "
        f"{r.tolerance:.0%}; a reading its own run flagged (foreign load, a throttled GPU) "
        f"is left out of the median, the MAD and the family, is never flagged, and asks "
        f"for a rerun when it misses the median by more than {r.tolerance:.0%} or its "
        f"check cannot be judged without it"
    )


def profile_line(p: ProfileFleet) -> str:
    """One profile's size and the threshold a lone slow cell must pass."""
    m, j = p.matrix, p.judgement
    head = (
        f"profile {m.profile}: {counted(m.nodes, 'node')}"
        + (
            f" ({counted(len(m.units), 'unit')}: each task and GPU apart)"
            if len(m.units) != m.nodes
            else ""
        )
        + f" x {counted(len(m.checks), 'check')}"
    )
    if not p.judged:
        return f"{head}: too few to judge (needs {fj.MIN_UNITS})"
    z1 = fj.first_threshold(j.family, j.rule.alpha, int(j.count.max(initial=0)))
    tainted = int(j.tainted.sum())
    left_out = (
        f"; {counted(tainted, 'reading')} flagged by {'its' if tainted == 1 else 'their'} own runs "
        f"left out, {counted(len(p.rerun), 'unit')} to rerun"
        if tainted
        else ""
    )
    return (
        f"{head}; {j.family} cells judged; a lone slow cell needs z <= {z1:.2f} and a figure "
        f"below {1 - j.rule.tolerance:.2f}x the fleet median; "
        f"{counted(len(p.slow), 'unit')} flagged" + left_out
    )


def cell_words(p: ProfileFleet, unit: int, col: int) -> str:
    j = p.judgement
    return (
        f"{short_id(p.matrix.checks[col].id)} {times(float(j.ratio[unit, col]))} "
        f"(z {float(j.z[unit, col]):.1f})"
    )


def worst_words(ratio: float) -> str:
    return f"{ratio - 1:+.0%}" if math.isfinite(ratio) else "-"


def health(p: ProfileFleet, limit: int | None = None) -> list[NodeHealth]:
    """The units below a floor or regressed against their baseline, most such checks first."""
    m = p.matrix
    bad = (m.floors == _FAIL).sum(axis=1) + (m.baselines == _REGRESSED).sum(axis=1)
    order = [int(u) for u in np.argsort(-bad, kind="stable") if bad[u] > 0][:limit]
    out = []
    for u in order:
        out.append(
            NodeHealth(
                m.units[u].name,
                tuple(short_id(m.checks[c].id) for c in np.flatnonzero(m.floors[u] == _FAIL)),
                tuple(
                    short_id(m.checks[c].id) for c in np.flatnonzero(m.baselines[u] == _REGRESSED)
                ),
            )
        )
    return out


def _health_counts(p: ProfileFleet) -> tuple[int, int]:
    m = p.matrix
    return int((m.floors == _FAIL).any(axis=1).sum()), int(
        (m.baselines == _REGRESSED).any(axis=1).sum()
    )


def verdict_line(fleet: Fleet) -> str:
    """The last line: how many slow, failed and to rerun, and the exit status."""
    if fleet.confirmed:
        return _confirmed_verdict_line(fleet)
    slow = _nodes([(p, s.unit) for p in fleet.profiles for s in p.slow])
    parts = [counted(slow, "unconfirmed slow node")] if slow else []
    if fleet.failed:
        parts.append(f"{fleet.failed_nodes} failed")
    word = _verdict_word(fleet, parts, "no node flagged")
    rerun = _nodes([(p, r.unit) for p in fleet.profiles for r in p.rerun])
    if rerun:
        parts.append(f"{rerun} to rerun, slow only at readings their runs flagged")
    return _verdict_text(fleet, word, parts)


def _nodes(units: Sequence[tuple[ProfileFleet, int]]) -> int:
    """How many nodes the units (nodes, or GPUs of nodes) are on, as the rerun names them.

    Counted as :func:`rerun_hosts` names them, so that a node with three slow GPUs is one
    slow node, as it is one candidate node.
    """
    return len({node_name(p.matrix.units[u]) for p, u in units})


def _verdict_word(fleet: Fleet, parts: list[str], none_found: str) -> str:
    """Drain when a node is slow or failed, else inconclusive while one awaits a rerun."""
    if parts:
        return "NODES TO DRAIN"
    if fleet.rerun:
        parts.append(none_found)
        return "INCONCLUSIVE"
    return "FLEET OK"


def _verdict_text(fleet: Fleet, word: str, parts: list[str]) -> str:
    return (
        f"perfsuite fleet: {word} ({', '.join(parts) or 'no node flagged'}) of "
        f"{counted(fleet.all_nodes, 'node')} (exit {fleet.exit_status})"
    )


# Confirmation: the commands that rerun the candidates, and what their rerun made of them.


def rerun_advice(fleet: Fleet) -> str:
    n = len(rerun_hosts(fleet))
    if fleet.confirmed:
        twice = len({node_name(p.matrix.units[r.unit]) for p, r in confirm_again(fleet)})
        left = [p.matrix.units[r.unit] for p in fleet.profiles for r in p.verdict_of(*AGAIN)]
        unsettled = len({node_name(u) for u in left})
        parts = [f"settle the {counted(unsettled, 'node')} left to rerun"] if unsettled else []
        if twice:
            parts.append(
                f"confirm the {counted(twice, 'drained node')} once more (heavy-tailed noise "
                "confirms a healthy node of a large fleet now and then; seldom twice)"
            )
        return f"to {' and '.join(parts)}, run them again and judge it:"
    return (
        f"UNCONFIRMED: one run's flags, which noise alone raises in a large fleet; before "
        f"draining, run the {counted(n, 'candidate node')} again and judge the rerun against this "
        "fleet (a slow node is slow again):"
    )


def confirm_line(fleet: Fleet) -> str:
    """How the reruns were judged."""
    r = fleet.rule
    candidates = sum(len(p.rechecked) for p in fleet.profiles)
    family = sum(p.confirmation.family for p in fleet.profiles if p.confirmation is not None)
    where, cells = str(fleet.confirm[0]), "candidate cells measured again"
    if len(fleet.confirm) > 1:
        where = ", ".join(f"{d} (rerun {k})" for k, d in enumerate(fleet.confirm, 1))
        where += ", each rerun judging only the candidates the ones before left standing"
        cells = "cells the last rerun judged"
    return (
        f"confirm: {counted(candidates, 'candidate unit')} (flagged, or to rerun) measured "
        "again in "
        f"{where}, each rerun reading against this fleet's median and spread, Holm over the "
        f"{family} {cells} at alpha "
        f"{r.alpha:g}: a unit is drained only when its rerun is slow again, significantly "
        f"and by more than {r.tolerance:.0%}, at a check it was flagged at; a rerun reading "
        "its own run flagged is never confirmed"
    )


def _confirmed_verdict_line(fleet: Fleet) -> str:
    def nodes(*verdicts: fj.Verdict) -> int:
        return _nodes([(p, r.unit) for p, r in rechecked_rows(fleet, *verdicts)])

    cleared = nodes(fj.Verdict.CLEARED)
    drained = nodes(fj.Verdict.CONFIRMED)
    parts = [f"{counted(drained, 'node')} confirmed slow by a rerun"] if drained else []
    rows = rechecked_rows(fleet, fj.Verdict.CONFIRMED)
    twice = _nodes([(p, r.unit) for p, r in rows if r.confirmations >= CONFIRMATIONS])
    if drained and len(fleet.confirm) > 1:
        parts = [f"{counted(drained, 'node')} confirmed slow ({twice} by {CONFIRMATIONS} reruns)"]
    if fleet.failures:
        parts.append(f"{fleet.failure_nodes} failed")
    word = _verdict_word(fleet, parts, "no node confirmed")
    if cleared:
        parts.append(f"{cleared} flagged but not confirmed")
    rerun = nodes(fj.Verdict.RERUN, fj.Verdict.MISSING, fj.Verdict.UNJUDGED)
    if rerun:
        parts.append(f"{rerun} to rerun again")
    return _verdict_text(fleet, word, parts)


def judged_by(r: fj.Rechecked) -> str:
    """Which rerun gave a candidate its verdict, and how many reruns confirmed it."""
    text = f"rerun {r.step}"
    if r.verdict == fj.Verdict.CONFIRMED and r.confirmations > 1:
        return f"{text} ({counted(r.confirmations, 'confirmation')})"
    if r.verdict != fj.Verdict.CONFIRMED and r.confirmations:
        return f"{text} (after {counted(r.confirmations, 'confirmation')})"
    return text


def _rerun_words(p: ProfileFleet, unit: int, col: int) -> str:
    """What the rerun read at a candidate cell, in words."""
    c, a = p.confirmation, p.again
    assert c is not None and a is not None
    state = fj.Recheck(int(c.state[unit, col]))
    if state == fj.Recheck.MISSING:
        return "not measured"
    if state == fj.Recheck.UNJUDGED:
        return f"not judged (the first run had fewer than {fj.MIN_UNITS} untainted figures)"
    text = f"{times(float(c.ratio[unit, col]))} (z {float(c.z[unit, col]):.1f})"
    return text + (" flagged by its run" if c.tainted[unit, col] else "")


def pair_words(p: ProfileFleet, unit: int, col: int) -> str:
    """A candidate cell: its figure over the fleet median in the first run, then the rerun."""
    first = float(p.judgement.ratio[unit, col])
    return (
        f"{short_id(p.matrix.checks[col].id)} {times(first) if math.isfinite(first) else '-'}"
        f" then {_rerun_words(p, unit, col)}"
    )


def _why_again(p: ProfileFleet, r: fj.Rechecked) -> str:
    """Why a candidate is to rerun after its rerun."""
    if r.verdict == fj.Verdict.RERUN:
        c, a = p.confirmation, p.again
        assert c is not None and a is not None
        cols = [k for k in r.checks if c.state[r.unit, k] == fj.Recheck.RERUN]
        words = "; ".join(dict.fromkeys(_taint_words(a, r.unit, k) for k in cols))
        return f"slow again, measured {words}"
    if r.verdict == fj.Verdict.MISSING:
        remeasured = p.remeasured is not None and bool(p.remeasured[r.unit])
        return "its rerun lacks a check it was flagged at" if remeasured else "not in the rerun"
    return "a check the first run could not judge: run the whole fleet again"


def _confirmed_lines(fleet: Fleet) -> list[str]:
    """The candidates after their rerun: confirmed, not confirmed, to rerun again."""
    lines: list[str] = []
    sections = (
        (
            (fj.Verdict.CONFIRMED,),
            "SLOW, confirmed by the rerun, worst first:",
            "slow again at (figure / fleet median: first run, then rerun)",
        ),
        (
            (fj.Verdict.CLEARED,),
            "NOT CONFIRMED, not drained: flagged by one run, not slow again in the rerun:",
            "at (figure / fleet median: first run, then rerun)",
        ),
        (
            (fj.Verdict.RERUN, fj.Verdict.MISSING, fj.Verdict.UNJUDGED),
            "RERUN AGAIN, not drained: the rerun settled nothing:",
            "at (figure / fleet median: first run, then rerun)",
        ),
    )
    for verdicts, title, at in sections:
        rows = rechecked_rows(fleet, *verdicts)
        if not rows:
            continue
        lines.append(title)
        again = verdicts[0] != fj.Verdict.CONFIRMED and verdicts[0] != fj.Verdict.CLEARED
        by = len(fleet.confirm) > 1  # which rerun decided: plain with one
        head = ("node", "profile", "rerun", *(("by",) if by else ()),
                *(("why",) if again else ()), at)  # fmt: skip
        table: list[tuple[str, ...]] = [head]
        for p, r in rows[:TERMINAL_ROWS]:
            lead = lead_check(p, r)
            checks = lead_first(r, lead)
            cells = [pair_words(p, r.unit, k) for k in checks[:3]]
            more = f"; {len(checks) - 3} more" if len(checks) > 3 else ""
            table.append(
                (p.matrix.units[r.unit].name, p.matrix.profile, worst_words(r.worst_ratio),
                 *((judged_by(r),) if by else ()),
                 *((_why_again(p, r),) if again else ()), "; ".join(cells) + more)
            )  # fmt: skip
        lines += ["  " + line for line in format_table(table)]
        if len(rows) > TERMINAL_ROWS:
            lines.append(f"  ... {len(rows) - TERMINAL_ROWS} more in the drain list")
    if not any(p.rechecked for p in fleet.profiles):
        lines.append("nothing to confirm: the first run flagged no node and asked none to rerun")
    return lines


def terminal_lines(fleet: Fleet, drain: str = "", page: str = "") -> list[str]:
    """Everything the terminal shows."""
    lines = [f"fleet {fleet.directory}: {with_records(fleet)}, "
             f"{counted(len(fleet.profiles), 'profile')} (each judged apart)"]  # fmt: skip
    lines += [rule_line(fleet)]
    if fleet.confirmed:
        lines.append(confirm_line(fleet))
    lines += [profile_line(p) for p in fleet.profiles]
    lines += _confirmed_lines(fleet) if fleet.confirmed else _first_run_lines(fleet)
    for p in fleet.profiles:
        floors, regressed = _health_counts(p)
        for h in health(p, limit=5):
            what = []
            if h.below_floor:
                what.append(f"below its floor at {', '.join(h.below_floor[:3])}")
            if h.regressed:
                what.append(f"regressed against its baseline at {', '.join(h.regressed[:3])}")
            lines.append(f"{h.name}: {'; '.join(what)}")
        if floors > 5 or regressed > 5:
            lines.append(
                f"{p.matrix.profile}: {floors} units below a floor, {regressed} regressed in all "
                "(the page lists them)"
            )
    for f in fleet.failed:
        lines.append(
            f"FAILED: task {f.task} ({where(f)}): {f.failed}"
            + (f"; output: {f.log}" if f.log else "")
        )
    for f in fleet.failed_again:
        lines.append(
            f"FAILED in the rerun: task {f.task} ({where(f)}): "
            f"{f.failed}" + (f"; output: {f.log}" if f.log else "")
        )
    commands = rerun_commands(fleet)
    if commands:
        lines.append(rerun_advice(fleet))
        lines += ["  " + c for c in commands]
    if drain:
        lines.append(f"drain list: {drain}")
    if page:
        lines.append(f"page: {page}")
    lines.append(verdict_line(fleet))
    return lines


def with_records(fleet: Fleet) -> str:
    """``12 nodes with records``, and the tasks where a node ran several."""
    tasks = f" ({counted(fleet.tasks, 'task')})" if fleet.tasks != fleet.nodes else ""
    return f"{counted(fleet.nodes, 'node')}{tasks} with records"


def _first_run_lines(fleet: Fleet) -> list[str]:
    """The slow units and those to rerun, as one run judged them."""
    lines: list[str] = []
    rows = slow_rows(fleet)
    if rows:
        lines.append("SLOW, worst first:")
        table = [("node", "profile", "worst", "slow at (figure / fleet median, z)")]
        for p, s in rows[:TERMINAL_ROWS]:
            cells = [cell_words(p, s.unit, c) for c in s.checks[:3]]
            more = f"; {len(s.checks) - 3} more" if len(s.checks) > 3 else ""
            table.append(
                (
                    p.matrix.units[s.unit].name,
                    p.matrix.profile,
                    f"{s.worst_ratio - 1:+.0%}",
                    "; ".join(cells) + more,
                )
            )
        lines += ["  " + line for line in format_table(table)]
        if len(rows) > TERMINAL_ROWS:
            lines.append(f"  ... {len(rows) - TERMINAL_ROWS} more slow in the drain list")
    reruns = rerun_rows(fleet)
    if reruns:
        lines.append("RERUN, not drained: their own runs flagged the readings they look slow at:")
        header = ("node", "profile", "worst", "measured", "at (figure / fleet median)")
        again: list[tuple[str, ...]] = [header]
        for p, r in reruns[:TERMINAL_ROWS]:
            cells = [rerun_cell(p, r.unit, c) for c in r.checks[:3]]
            more = f"; {len(r.checks) - 3} more" if len(r.checks) > 3 else ""
            again.append(
                (p.matrix.units[r.unit].name, p.matrix.profile, worst_words(r.worst_ratio),
                 rerun_flags(p, r), "; ".join(cells) + more)
            )  # fmt: skip
        lines += ["  " + line for line in format_table(again)]
        if len(reruns) > TERMINAL_ROWS:
            lines.append(
                f"  ... {len(reruns) - TERMINAL_ROWS} more to rerun in the drain list's rerun"
            )
    return lines


# Each drain entry's ``reason`` (perfsuite.fleet.drain lists the entries).


def slow_reason(check_id: str, ratio: float, z: float, more: int) -> str:
    """A slow unit's reason, from its worst check's ratio and z (as the entry rounds them)."""
    return (
        f"slow, unconfirmed: {short_id(check_id)} at {ratio:.2f}x the fleet median (z {z:.1f})"
        + (f" and {more} more checks" if more else "")
    )


def rerun_reason(p: ProfileFleet, r: fj.RerunUnit) -> str:
    """Why a unit is to rerun: its worst reading its own run flagged, and what flagged it."""
    m, j = p.matrix, p.judgement
    first = r.checks[0]
    worst = (
        f"{short_id(m.checks[first].id)} at {j.ratio[r.unit, first]:.2f}x the fleet median"
        if math.isfinite(r.worst_ratio)
        else f"{short_id(m.checks[first].id)} cannot be judged without it"
    )
    more = len(r.checks) - 1
    return f"rerun: {worst}, measured {taint_text(p, r.unit, first)}" + (
        f"; and {more} more checks" if more else ""
    )


def rechecked_reason(p: ProfileFleet, r: fj.Rechecked, lead: int) -> str:
    """What a rerun made of a candidate, at the check that gives its verdict (``lead``)."""
    m, j, c = p.matrix, p.judgement, p.confirmation
    assert c is not None and p.again is not None
    name = short_id(m.checks[lead].id)
    first, again = float(j.ratio[r.unit, lead]), float(c.ratio[r.unit, lead])
    was = f"{first:.2f}x in the first run" if math.isfinite(first) else "tainted in the first run"
    more = f"; and {len(r.checks) - 1} more checks" if len(r.checks) > 1 else ""
    if r.verdict == fj.Verdict.CONFIRMED:
        reason = (
            f"slow, confirmed by a rerun: {name} at {again:.2f}x the fleet median "
            f"(z {float(c.z[r.unit, lead]):.1f}), {was}"
        )
    elif r.verdict == fj.Verdict.CLEARED:
        rerun = f"{again:.2f}x" if math.isfinite(again) else "within the tolerance"
        reason = f"not confirmed: {name} at {rerun} the fleet median in the rerun, {was}"
    elif r.verdict == fj.Verdict.RERUN:
        reason = (
            f"rerun again: {name} at {again:.2f}x the fleet median in the rerun, measured "
            f"{_taint_words(p.again, r.unit, lead)}"
        )
    else:
        reason = f"rerun again: {name}: {_rerun_words(p, r.unit, lead)}"
    return reason + more


def failed_reason(f: NodeStatus, again: bool) -> str:
    """A failed task's reason: what failed, in the first run or a rerun."""
    return f"failed{' in the rerun' if again else ''}: {f.failed}"
