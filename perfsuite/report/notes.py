"""The notes a run's end says once, over all its results: the terminal, the HTML and Markdown.

What the machine probe saw, what a young or back-to-back baseline can tell, and what the
session's verdict means and what to do next.  Words only: the verdict is decided elsewhere.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from perfsuite.judge import outcome, stats
from perfsuite.measure import probe
from perfsuite.model import FlagKind, Result
from perfsuite.report.explain import back_to_back, machine_moved, signed_percent


def machine_note(results: Sequence[Result], quiet_within: float = 0.05) -> str:
    """How far the machine probe moved against the baseline runs over a run, or "".

    Empty while its median move stays within ``quiet_within`` for both components and no
    change was left noisy for it: a quiet machine needs no note.
    """
    moves: dict[str, list[float]] = {}
    for r in results:
        change = r.facts.machine_change
        if change is not None:
            moves.setdefault(change.component, []).append(change.ratio)
    held = sum(
        r.baseline.verdict == "noisy"
        and any(machine_moved(flag) for flag in r.baseline.noise_flags)
        for r in results
    )
    medians = {k: statistics.median(moves[k]) for k in probe.COMPONENTS if k in moves}
    if not held and all(abs(m - 1) <= quiet_within for m in medians.values()):
        return ""
    parts = ", ".join(f"{signed_percent(m)} ({k})" for k, m in medians.items())
    checks = sum(len(v) for v in moves.values())
    text = (
        f"machine: the framework-free probe ran {parts} against the baseline runs "
        f"(median over {checks} CPU checks, which are judged per unit of machine speed)"
    )
    if held:
        text += f"; {held} change(s) left noisy because the machine itself moved that far"
    return text


def young_baseline_note(results: Sequence[Result]) -> str:
    """How many runs a young baseline has and needs, said once; empty when it has them."""
    young = [r for r in results if r.baseline.between_source == "cautious"]
    if not young:
        return ""
    caution = (
        f"until then only changes beyond a cautious spread (sd {stats.CAUTIOUS_BETWEEN_SD:.0%}) "
        "count"
    )
    close = [
        r for r in young if back_to_back(r.baseline.baseline_runs, r.baseline.baseline_sessions)
    ]
    if close:
        fewest = min(r.baseline.baseline_sessions or 1 for r in close)
        minutes = stats.BACK_TO_BACK_S // 60
        return (
            f"baseline: {len(young)} check(s) have runs from {fewest} session(s) of the "
            f"{stats.MIN_RUNS} a verdict needs to know their run-to-run spread (runs accepted "
            f"close together, within --perf-baseline-window, {minutes} min by default, share "
            f"the machine's state); {caution}. Add runs with --perf-save-baseline in separate "
            "sessions, hours apart, or compare two stacks with perfsuite ab"
        )
    fewest = min(r.baseline.baseline_runs or 1 for r in young)
    return (
        f"baseline: {len(young)} check(s) have {fewest} baseline run(s) of the "
        f"{stats.MIN_RUNS} a verdict needs to know their run-to-run spread; {caution}. Add "
        "runs with --perf-save-baseline"
    )


def baseline_note(results: Sequence[Result]) -> str:
    """A warning when the baseline's runs were taken back to back, or "".

    Checks judged with the cautious spread (the baseline's runs come from too few sessions)
    are left out: the young-baseline note speaks for them.  What is left was judged with
    the runs' own spread although they were close together (``--perf-baseline-window`` 0).
    """
    spans = [
        r.facts.baseline_span_s
        for r in results
        if r.facts.baseline_span_s is not None and r.baseline.between_source != "cautious"
    ]
    span = statistics.median(spans) if spans else math.inf
    if span >= stats.BACK_TO_BACK_S:
        return ""
    minutes = span / 60
    return (
        f"baseline: its runs were accepted within {minutes:.0f} min of each other (median over "
        f"{len(spans)} checks); runs taken back to back share the machine's state and "
        "understate the spread between runs hours apart, so expect false alarms on a shared "
        "machine: accept baseline runs from separate jobs, hours apart"
    )


def load_remedy(loaded: Sequence[Result], saving: bool = False) -> str:
    """What to do about checks whose foreign load nothing cancelled, by why nothing did.

    Three groups, each with its count where more than one is present:

    * measured without --perf-fidelity: a rerun with it pairs a bare reference with each
      check that has one, and their ratio cancels the load;
    * measured with it and paired, but judged against baseline runs saved without it (no
      ratios to compare with): the baseline's runs are to be saved with it too;
    * measured with it and still unpaired (an allreduce, an input pipeline, a training
      step): nothing cancels the load, and only a quieter machine helps.
    """
    without = [r for r in loaded if r.policy is None or not r.policy.references]
    with_flag = [r for r in loaded if r.policy is not None and r.policy.references]
    paired = [
        r for r in with_flag if not saving and r.bare_reference and r.bare_reference.pair_ratios
    ]
    unpaired = len(with_flag) - len(paired)
    verb = "save" if saving else "judge"
    them = "them" if unpaired > 1 else "it"
    cancel = (
        "is then paired with it and saved with its load, which cancels in their ratio"
        if saving
        else "is then paired with it, and their ratio cancels the load"
    )
    groups = [  # (count, who, what to do: in full, and short beside another group)
        (
            len(without),
            "without --perf-fidelity",
            f"rerun with --perf-fidelity (a CPU check with a bare reference {cancel}) or on "
            "a quieter machine",
            "rerun with it, or on a quieter machine",
        ),
        (
            len(paired),
            "against baseline runs saved without --perf-fidelity",
            "save the baseline's runs with --perf-fidelity too, so that their ratios to the "
            "bare reference are compared",
            "save the baseline's runs with it too",
        ),
        (
            unpaired,
            "with no bare reference",
            f"nothing paired with {them} cancels the load, so {verb} {them} on a quieter machine",
            f"{verb} {them} on a quieter machine",
        ),
    ]
    present = [g for g in groups if g[0]]
    if len(present) == 1:
        return present[0][2]
    return " and ".join(f"{n} {who} ({short})" for n, who, _, short in present)


def verdict_advice(verdict: outcome.SessionVerdict) -> str:
    """What the session verdict means and what to do next ("" for a pass or a failure).

    The terminal, the HTML banner and the Markdown summary all give this one sentence.
    """
    if verdict.state == "measured":
        return (
            "nothing was judged: no check had a floor figure or a baseline; "
            "save a baseline (--perf-save-baseline, in three sessions on a quiet machine) to "
            "judge the next runs"
        )
    if verdict.state == "empty":
        return "this run holds no measured check, so nothing passed"
    if verdict.state != "inconclusive":
        return ""
    under_load = [  # the load left in the verdict: not cancelled by a paired ratio
        r.facts.load_cancelled is None
        and any(f.kind is FlagKind.FOREIGN_LOAD for f in r.noise_flags)
        for r in verdict.noisy
    ]
    loaded = sum(under_load)
    parts = []
    if loaded:
        remedy = load_remedy([r for r, load in zip(verdict.noisy, under_load, strict=True) if load])
        parts.append(
            f"{loaded} measured under foreign load: {remedy}, or judge a change with "
            "perfsuite ab, whose pairs share the load"
        )
    rest = len(verdict.noisy) - loaded
    if rest:
        limited = sum(
            1
            for r, load in zip(verdict.noisy, under_load, strict=True)
            if not load
            and r.baseline.cannot_detect is not None
            and r.baseline.cannot_detect.needed is None
        )
        more = (
            "save more baseline runs, in other sessions (the baseline's runs limit them)"
            if limited
            else "rerun, or take more samples (--perf-samples)"
        )
        parts.append(
            f"{rest} changed beyond the tolerance without confirmation (see each check's "
            f"reason): {more}"
        )
    return "; ".join(parts)
