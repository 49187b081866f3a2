"""``perfsuite history``: each check's trend over the nights, its change points and their causes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

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
