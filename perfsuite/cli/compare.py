"""``perfsuite compare``: run records A against B, from files or from a results store."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfsuite.cli.args import (
    a_page,
    add_family_options,
    distinct_inputs,
    duration_arg,
    fraction,
    not_an_input,
    outcomes_fail_on,
    path_arg,
    positive,
)
from perfsuite.judge import outcome, stats
from perfsuite.judge.compare import compare_runs, compared_record, environment_diff, sessions
from perfsuite.model import Result, RunRecord
from perfsuite.report.compare_text import (
    counts_lines,
    environment_lines,
    findings_lines,
    passes_lines,
    runs_lines,
    table_lines,
    verdict_line,
)
from perfsuite.report.explain import explained_record
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
        _print(passes_lines(args.passes, [*before, b]))
    rows, only_a, only_b = compare_runs(
        before,
        b,
        tolerance=args.tolerance,
        alpha=args.alpha,
        correction=args.correction,
        window_s=args.baseline_window,
    )
    _print(
        runs_lines(
            before,
            b,
            passes=args.passes,
            correction=args.correction,
            alpha=args.alpha,
            n=len(rows),
        )
    )
    judged = explained_record(compared_record(b, rows, args.tolerance, args.correction))
    by_id = {row.id: row for row in rows}
    rows = [by_id[r.id] for r in outcome.worst_first(judged.results) if r.id in by_id]
    _print(table_lines(rows))
    _print(findings_lines(rows, judged, only_a, only_b))
    _print(environment_lines(environment_diff(before[-1].environment, b.environment)))
    compared = [r for r in judged.results if r.id in {row.id for row in rows}]
    if args.html is not None:
        _write_html(Path(args.html), judged, compared, before, b, args.fail_on)
        print(f"HTML report: {args.html}")
    _print(counts_lines(compared, b))
    verdict = outcome.record_verdict(judged, args.fail_on, results=compared)
    print(verdict_line(verdict))
    return verdict.exit_code


def _print(lines: list[str]) -> None:
    for line in lines:
        print(line)


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


def add_compare_parser(sub: Any) -> None:
    """The ``compare`` command's arguments."""
    comp = sub.add_parser(
        "compare",
        help="compare run records: one or more before (A), the last one after (B)",
        description=(
            "Compare the last run record (B) against the ones before it (A). Several A runs "
            f"act as a multi-run baseline. Exit status: {outcome.EXIT_OK} no regression, "
            f"{outcome.EXIT_REGRESSED} a regression (or what --fail-on names), "
            f"{outcome.EXIT_USAGE} usage error, {outcome.EXIT_INCONCLUSIVE} undecided (noisy "
            "checks and nothing that --fail-on fails, nothing compared, or B interrupted); "
            "the table below."
        ),
    )
    comp.add_argument(
        "runs", metavar="RUN.json", type=path_arg, nargs="+", help="A run(s) ..., then B"
    )
    comp.add_argument(
        "--store",
        type=path_arg,
        default=None,
        metavar="PATH",
        help="read the runs from this results store: give run ids instead of files "
        "(default: none, the runs are record files)",
    )
    comp.add_argument(
        "--tolerance",
        type=fraction,
        default=None,
        help="override the tolerance B was judged with (a fraction between 0 and 1; "
        "default: each check's own, as B was judged)",
    )
    add_family_options(comp, "significance level", outcomes_fail_on, ", ".join(outcome.CHOOSABLE))
    comp.add_argument(
        "--passes",
        type=positive,
        default=1,
        metavar="N",
        help="every N consecutive records are passes of one session (the last N are B): each "
        "check is judged by its fastest pass, before and after alike (default 1)",
    )
    comp.add_argument(
        "--baseline-window",
        type=duration_arg,
        default=stats.BACK_TO_BACK_S,
        metavar="DURATION",
        help="A runs created within this time of each other (30m, 1800s, 1h) count as one "
        f"session; with runs from fewer than {stats.MIN_RUNS} sessions A is judged with a "
        "cautious run-to-run spread; 0 counts each run as its own (default: 30m)",
    )
    comp.add_argument(
        "--html",
        type=path_arg,
        metavar="FILE",
        help="also write the A/B view as an HTML report to FILE (default: none)",
    )
    comp.set_defaults(func=compare_command)
