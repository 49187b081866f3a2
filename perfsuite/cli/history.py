"""``perfsuite history``: each check's trend over the nights, its change points and their causes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfsuite.cli.args import (
    add_family_options,
    fraction,
    only_checks,
    path_arg,
    positive,
    verdicts_fail_on,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.detect import resolve
from perfsuite.hardware.profile import ProfileRegistry, did_you_mean
from perfsuite.judge import outcome
from perfsuite.judge import trends as hist
from perfsuite.model import RunRecord
from perfsuite.report import history_text
from perfsuite.store import records


def _history_profiles(source: Path, is_store: bool) -> list[str]:
    """The profiles with runs: a store's, or the folders of a report directory."""
    if not is_store:
        return records.profiles(source)
    from perfsuite.store import Store

    return sorted(name for name, _ in Store.open(source).info().profiles)


def history_command(args: argparse.Namespace) -> int:
    """Read a profile's runs, judge their trends, print them (or JSON), write the site."""
    import json

    report_dir = Path(args.store or args.report_dir)
    known = _history_profiles(report_dir, args.store is not None)
    args.profile = _chosen_profile(args.profile, report_dir, known)
    if args.html is not None and Path(args.html).exists() and not Path(args.html).is_dir():
        raise PerfsuiteError(f"--html {args.html}: not a directory; name a directory for the site")
    runs, problems = _read_runs(args, report_dir)
    shown = hist.window(hist.numbered(runs), last=args.last, since=args.since)
    if not shown:
        raise PerfsuiteError(
            f"{report_dir / args.profile}: no run since {args.since.isoformat()} (the last of "
            f"{len(runs)} is {runs[-1].created})"
        )
    settings = hist.Settings(
        args.min_effect,
        args.alpha,
        args.correction,
        tuple(args.k),
        args.last,
        args.since,
        tuple(sorted(args.fail_on)),
    )
    trends = hist.trends(shown, settings)
    reached = hist.exit_verdicts(trends)
    failed = sorted(reached & set(args.fail_on))
    code = outcome.EXIT_REGRESSED if failed else outcome.EXIT_OK
    verdict = (
        "regressed" if "regressed" in reached else "improved" if "improved" in reached else "steady"
    )
    if args.html is not None:
        current = (args.profile, shown, len(runs), trends)
        _write_site(args, report_dir, current, settings, known)
    if args.json:
        doc = history_text.history_json(
            args.profile, shown, trends, settings, verdict, code, problems
        )
        print(json.dumps(doc, indent=1))
        return code
    for line in history_text.text(args.profile, shown, len(runs), trends, failed, code):
        print(line)
    if args.html is not None:
        print(f"history site: {args.html}")
    return code


def _chosen_profile(asked: str | None, report_dir: Path, known: list[str]) -> str:
    """The profile named (in any case), else the only one with runs, else this machine's."""
    if asked is None:
        if len(known) == 1:
            return known[0]
        here = resolve("auto", ProfileRegistry()).name
        if here not in known:
            raise PerfsuiteError(
                f"{report_dir}: no run records of this machine's profile ({here}); name "
                f"one with --profile (run records exist for: {', '.join(known) or 'none'})"
            )
        asked = here
    folded = {name.lower(): name for name in known}
    if asked.lower() not in folded:
        raise PerfsuiteError(
            f"{report_dir}: no run records of profile {asked!r}"
            f"{did_you_mean(asked, known)} (run records "
            f"exist for: {', '.join(known) or 'none'})"
        )
    return folded[asked.lower()]


def _read_runs(args: argparse.Namespace, report_dir: Path) -> tuple[list[RunRecord], list[str]]:
    """The profile's runs, and the run records skipped as unreadable (named on stderr)."""
    problems: list[str] = []
    if args.store is not None:  # a store's runs were checked as they went in, and read whole
        from perfsuite.store import load_runs

        runs = load_runs(report_dir, args.profile)
    else:
        runs = records.history(report_dir, args.profile, skip_unreadable=True, problems=problems)
    if not args.json:
        for problem in problems:
            print(f"perfsuite: skipped a run record: {problem}", file=sys.stderr)
    if not runs:
        raise PerfsuiteError(f"{report_dir / args.profile}: no readable run records")
    return runs, problems


def _write_site(
    args: argparse.Namespace,
    report_dir: Path,
    current: tuple[str, Sequence[tuple[int, RunRecord]], int, Sequence[hist.Trend]],
    settings: hist.Settings,
    known: list[str],
) -> None:
    """The history site: a page per profile, ``current`` judged already, the others as read."""
    from perfsuite.report.history_page import write_site

    if args.store is not None:
        from perfsuite.store import load_runs

        def load(name: str) -> list[RunRecord]:
            return load_runs(report_dir, name)

        write_site(Path(args.html), report_dir, current, settings, load, known)
    else:
        write_site(Path(args.html), report_dir, current, settings)


def add_history_parser(sub: Any) -> None:
    """The ``history`` command's arguments."""
    histp = sub.add_parser(
        "history",
        help="each check's trend over the run records, with change points",
        description=(
            "Read a profile's run records under --report-dir, oldest first, and show each "
            "check's trend with its change points: a level that moved by at least "
            "--min-effect, significant over every check of the profile (the run verdict's "
            "correction), with what changed in the recorded stack that night and the "
            "perfsuite bisect command to run next. One bad night is an outlier, not a "
            "change. Run numbers count the profile's runs. A corrupt record is named and "
            f"skipped. Exit status: {outcome.EXIT_OK} no regression (improvements too, unless "
            f"--fail-on improved), {outcome.EXIT_REGRESSED} a regression (or what --fail-on "
            f"names), {outcome.EXIT_USAGE} usage error (the table below). See docs/history.md."
        ),
    )
    histp.add_argument(
        "--report-dir",
        type=path_arg,
        default="reports",
        metavar="DIR",
        help="where the run records are (default: reports)",
    )
    histp.add_argument(
        "--store",
        type=path_arg,
        default=None,
        metavar="PATH",
        help="read the runs from this results store instead of --report-dir's record files "
        "(default: none; sessions write one at REPORT_DIR/_store)",
    )
    histp.add_argument(
        "--profile",
        default=None,
        help="the hardware profile whose runs to read (default: this machine's, or the only "
        "one with run records); any case",
    )
    only_checks(histp)
    histp.add_argument(
        "--min-effect",
        "--tolerance",
        dest="min_effect",
        type=fraction,
        metavar="FRACTION",
        default=hist.DEFAULT_MIN_EFFECT,
        help="smallest level change reported as a change point, a fraction between 0 and 1 "
        f"(default {hist.DEFAULT_MIN_EFFECT})",
    )
    add_family_options(
        histp,
        "significance over the profile's checks",
        verdicts_fail_on,
        "regressed, improved, unknown (too few runs to judge)",
    )
    histp.add_argument(
        "--last",
        type=positive,
        default=None,
        metavar="N",
        help="only the last N runs of the profile, numbered as among all (default: all)",
    )
    histp.add_argument(
        "--since",
        type=hist.since_arg,
        default=None,
        metavar="DATE",
        help="only runs created on or after DATE, ISO 8601: 2026-11-30 or "
        "2026-11-30T06:00, UTC unless it says (default: all)",
    )
    histp.add_argument(
        "--json",
        action="store_true",
        help="print the history as JSON (schema in docs/history.md) instead of the table "
        "(default: the table)",
    )
    histp.add_argument(
        "--html",
        type=path_arg,
        metavar="DIR",
        help="also write the history site to DIR: an index and one self-contained page per "
        "profile under --report-dir (default: none)",
    )
    histp.set_defaults(func=history_command)
