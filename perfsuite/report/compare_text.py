"""``perfsuite compare`` in words: the runs, the table, what moved, and the verdict line.

The command (:mod:`perfsuite.cli.compare`) judges through :mod:`perfsuite.judge.compare`
and prints these lines; nothing here decides an outcome.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from perfsuite.judge import outcome
from perfsuite.judge.compare import Row
from perfsuite.judge.outcome import SessionVerdict
from perfsuite.model import Result, RunRecord
from perfsuite.report.explain import CORRECTION_NAMES
from perfsuite.report.headline import count_text, headline, worst_named
from perfsuite.report.notes import young_baseline_note
from perfsuite.report.terminal import format_table, printable, short_id


def passes_lines(passes: int, kept: Sequence[RunRecord]) -> list[str]:
    """How sessions of several passes were folded: which pass each check was kept from."""
    out = [
        f"sessions of {passes} passes: each check kept from its fastest pass, "
        "before and after alike"
    ]
    for session in kept:
        counts = Counter(r.facts.passes.kept for r in session.results if r.facts.passes)
        out.append(f"  {session.run_id}: " + ", ".join(f"{n} from {k}" for k, n in counts.items()))
    return out


def runs_lines(
    before: Sequence[RunRecord], b: RunRecord, *, passes: int, correction: str, alpha: float, n: int
) -> list[str]:
    """The runs compared, the profile, and the correction over the ``n`` checks."""
    out = [f"A: {a.run_id} ({a.created})" for a in before]
    out.append(f"B: {b.run_id} ({b.created})")
    profile = b.hardware_profile.get("name")
    sessions = "session(s)" if passes > 1 else "run(s)"
    out.append(
        f"profile: {profile}; {len(before)} {sessions} before; "
        f"{CORRECTION_NAMES[correction]} over {n} checks, alpha {alpha}"
    )
    return out


def table_lines(rows: Sequence[Row]) -> list[str]:
    """Each check's medians, ratio, interval, p and verdict; the probe's move when it counted."""
    table = [("check", "A", "B", "ratio B/A", "95% CI", "p", "verdict")]
    for r in rows:
        c = r.comparison
        table.append(
            (
                short_id(r.id),
                f"{r.a_median:.4g} {r.unit}",
                f"{r.b_median:.4g} {r.unit}",
                f"{c.ratio:.3f}{'*' if r.machine else ''}",
                f"[{c.ci_low:.3f}, {c.ci_high:.3f}]",
                f"{c.p_value:.2g}",
                r.verdict,
            )
        )
    out = format_table(table)
    moves = [r.machine.ratio for r in rows if r.machine]
    if moves:
        out.append(
            f"* {len(moves)} check(s) judged per unit of machine speed: the framework-free "
            f"probe moved {_signed(min(moves))} to {_signed(max(moves))} from A to B"
        )
    return out


def findings_lines(
    rows: Sequence[Row], judged: RunRecord, only_a: Iterable[str], only_b: Iterable[str]
) -> list[str]:
    """Why each check that moved did, a young baseline's note, the checks in one run only."""
    reasons = {r.id: r.baseline.reason for r in judged.results}
    out = [
        f"{r.verdict}: {short_id(r.id)}: {printable(reasons[r.id])}"
        for r in rows
        if r.verdict != "ok"
    ]
    young = young_baseline_note(judged.results)
    if young:
        words = young.replace("Add runs with --perf-save-baseline", "Give more runs before")
        out.append(words.replace("--perf-baseline-window", "--baseline-window"))
    out += [f"only in A: {node_id}" for node_id in only_a]
    out += [f"only in B: {node_id}" for node_id in only_b]
    return out


def environment_lines(diff: Sequence[tuple[str, Any, Any]]) -> list[str]:
    """The environment's changes from A to B, one a line."""
    head = "\nenvironment changes (A -> B):" if diff else "\nenvironment: no changes"
    return [head] + [f"  {key}: {old!r} -> {new!r}" for key, old, new in diff]


def counts_lines(compared: Sequence[Result], b: RunRecord) -> list[str]:
    """How many checks came out each way; what B lacked (results, completion, crashed checks)."""
    counted = count_text(outcome.counts(compared))
    if not counted:
        counted = "nothing compared: " + (
            f"B ({b.run_id}) holds no results"
            if not b.results
            else "no check was measured in both A and B, in the same unit"
        )
    out = ["\n" + counted]
    if b.incomplete:
        out.append(f"B ({b.run_id}) is incomplete: {printable(b.incomplete)}")
    out += [
        f"crashed in B: {short_id(c.id)} ({c.phase}): {printable(c.message)}" for c in b.crashed
    ]
    return out


def _signed(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def verdict_line(verdict: SessionVerdict) -> str:
    """The last line: ``compare: FAILED (2 regressed): the worst (exit 1)``."""
    worst = worst_named(verdict)
    return (
        f"\ncompare: {headline(verdict)}"
        + (f": {worst}" if worst else "")
        + f" (exit {verdict.exit_code})"
    )
