"""``perfsuite compare``: run records A against B, from files or from a results store."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from perfsuite.cli.args import a_page, distinct_inputs, not_an_input, signed
from perfsuite.judge import outcome
from perfsuite.judge.compare import (
    Row,
    compare_runs,
    compared_record,
    environment_diff,
    sessions,
)
from perfsuite.model import Result, RunRecord
from perfsuite.report.explain import CORRECTION_NAMES, explained_record
from perfsuite.report.notes import young_baseline_note
from perfsuite.report.terminal import format_table, printable, short_id
from perfsuite.store import records
from perfsuite.store.files import check_target, write_text_atomic


def compared_runs(args: argparse.Namespace) -> list[RunRecord]:
    """The runs compared: record files, or with --store the runs of those ids in the store."""
    if args.store is None:
        return [records.load_record(Path(p)) for p in args.runs]
    from perfsuite.store import load_runs

    return load_runs(Path(args.store), run_ids=args.runs)


def compare_command(args: argparse.Namespace) -> int:
    """Read the runs, judge B against A, print the table and what moved; the page on --html."""
    if args.html is not None:
        check_target(a_page(not_an_input(args.html, args.runs, "--html"), "--html"))
    loaded = compared_runs(args)
    distinct_inputs(args.runs, loaded)
    *before, b = sessions(loaded, args.passes)
    if args.passes > 1:
        _print_passes(args.passes, [*before, b])
    rows, only_a, only_b = compare_runs(
        before,
        b,
        tolerance=args.tolerance,
        alpha=args.alpha,
        correction=args.correction,
        window_s=args.baseline_window,
    )
    _print_runs(args, before, b, len(rows))
    judged = explained_record(compared_record(b, rows, args.tolerance, args.correction))
    by_id = {row.id: row for row in rows}
    rows = [by_id[r.id] for r in outcome.worst_first(judged.results) if r.id in by_id]
    _print_table(rows)
    _print_findings(rows, judged, only_a, only_b)
    diff = environment_diff(before[-1].environment, b.environment)
    print("\nenvironment changes (A -> B):" if diff else "\nenvironment: no changes")
    for key, old, new in diff:
        print(f"  {key}: {old!r} -> {new!r}")
    compared = [r for r in judged.results if r.id in {row.id for row in rows}]
    if args.html is not None:
        _write_html(Path(args.html), judged, compared, before, b, args.fail_on)
        print(f"HTML report: {args.html}")
    _print_counts(compared, b)
    verdict = outcome.record_verdict(judged, args.fail_on, results=compared)
    worst = verdict.named()
    print(
        f"\ncompare: {verdict.headline}"
        + (f": {worst}" if worst else "")
        + f" (exit {verdict.exit_code})"
    )
    return verdict.exit_code


def _print_passes(passes: int, kept: list[RunRecord]) -> None:
    """How sessions of several passes were folded: which pass each check was kept from."""
    print(
        f"sessions of {passes} passes: each check kept from its fastest pass, "
        "before and after alike"
    )
    for session in kept:
        counts = Counter(r.facts.passes.kept for r in session.results if r.facts.passes)
        print(f"  {session.run_id}: " + ", ".join(f"{n} from {k}" for k, n in counts.items()))


def _print_runs(args: argparse.Namespace, before: list[RunRecord], b: RunRecord, n: int) -> None:
    """The runs compared, the profile, and the correction over the ``n`` checks."""
    for a in before:
        print(f"A: {a.run_id} ({a.created})")
    print(f"B: {b.run_id} ({b.created})")
    profile = b.hardware_profile.get("name")
    print(
        f"profile: {profile}; {len(before)} {'session(s)' if args.passes > 1 else 'run(s)'} "
        "before; "
        f"{CORRECTION_NAMES[args.correction]} over {n} checks, alpha {args.alpha}"
    )


def _print_table(rows: list[Row]) -> None:
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
    print("\n".join(format_table(table)))
    moves = [r.machine.ratio for r in rows if r.machine]
    if moves:
        print(
            f"* {len(moves)} check(s) judged per unit of machine speed: the framework-free "
            f"probe moved {signed(min(moves))} to {signed(max(moves))} from A to B"
        )


def _print_findings(
    rows: list[Row], judged: RunRecord, only_a: list[str], only_b: list[str]
) -> None:
    """Why each check that moved did, a young baseline's note, the checks in one run only."""
    reasons = {r.id: r.baseline.reason for r in judged.results}
    for r in rows:
        if r.verdict != "ok":
            print(f"{r.verdict}: {short_id(r.id)}: {printable(reasons[r.id])}")
    young = young_baseline_note(judged.results)
    if young:
        words = young.replace("Add runs with --perf-save-baseline", "Give more runs before")
        print(words.replace("--perf-baseline-window", "--baseline-window"))
    for node_id in only_a:
        print(f"only in A: {node_id}")
    for node_id in only_b:
        print(f"only in B: {node_id}")


def _write_html(
    path: Path,
    judged: RunRecord,
    compared: list[Result],
    before: list[RunRecord],
    b: RunRecord,
    fail_on: Iterable[str],
) -> None:
    """The A/B page: what compare judged, under compare's --fail-on."""
    from perfsuite.report.html import render

    # Its banner and counts are the ones printed after it, and its outcome the exit status.
    shown = replace(
        judged,
        results=tuple(compared),
        settings={**judged.settings, "fail_on": sorted(fail_on)},
    )
    html = render(
        shown,
        baseline=before[-1],
        title=f"perfsuite A/B: {before[-1].run_id} -> {b.run_id}",
        compared_with=[a.run_id for a in before],
    )
    write_text_atomic(path, html)


def _print_counts(compared: list[Result], b: RunRecord) -> None:
    """How many checks came out each way; what B lacked (results, completion, crashed checks)."""
    counts = outcome.counts(compared)
    print(
        "\n"
        + (
            ", ".join(f"{counts[k]} {k}" for k in outcome.ORDER if counts.get(k))
            or "nothing compared: "
            + (
                f"B ({b.run_id}) holds no results"
                if not b.results
                else "no check was measured in both A and B, in the same unit"
            )
        )
    )
    if b.incomplete:
        print(f"B ({b.run_id}) is incomplete: {printable(b.incomplete)}")
    for crash in b.crashed:
        message = printable(crash.message)
        print(f"crashed in B: {short_id(crash.id)} ({crash.phase}): {message}")
