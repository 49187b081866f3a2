"""``perfsuite report`` (a run record as a page) and ``perfsuite baseline accept``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.cli.args import (
    a_page,
    distinct_inputs,
    not_an_input,
    only_checks,
    path_arg,
    window_arg,
)
from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.judge import outcome
from perfsuite.judge.compare import comparable
from perfsuite.model import READABLE_VERSIONS, RunRecord
from perfsuite.model.baseline import DEFAULT_WINDOW, MAX_WINDOW, MIN_WINDOW
from perfsuite.report.terminal import short_id
from perfsuite.store import records
from perfsuite.store.baseline import BaselineStore, safe_profile_name
from perfsuite.store.files import (
    check_schema_version,
    check_target,
    read_text_bounded,
    write_text_atomic,
)

if TYPE_CHECKING:
    from perfsuite.ab import Outcome


def readable_history(report_dir: Path, profile: str) -> list[RunRecord]:
    """A profile's run records; each unreadable one is named on stderr and skipped."""
    problems: list[str] = []
    runs = records.history(report_dir, profile, skip_unreadable=True, problems=problems)
    for problem in problems:
        print(f"perfsuite: skipped a run record: {problem}", file=sys.stderr)
    return runs


def read_run_or_ab(path: Path) -> RunRecord | Outcome:
    """A run record, or an A/B's record (``ab.json``), read and checked whole once."""
    from perfsuite.ab.record import is_ab_record, read_outcome
    from perfsuite.store.validate import parse_json

    text = read_text_bounded(path, "run record", records.MAX_RECORD_BYTES)
    data = parse_json(text, str(path), "run record")
    if not isinstance(data, dict):
        raise StorageError(
            f"{path}: corrupt run record: expected a JSON object (file left untouched)"
        )
    if is_ab_record(data):
        return read_outcome(path, data)
    check_schema_version(data, path, "run record", READABLE_VERSIONS)
    return records.record_from(data, path)


def report_command(args: argparse.Namespace) -> int:
    from perfsuite.report.html import render

    inputs = [args.run, *([args.baseline] if args.baseline else [])]
    out = not_an_input(args.output or Path(args.run).with_suffix(".html"), inputs, "-o")
    a_page(out, "-o")
    check_target(out)
    record = read_run_or_ab(Path(args.run))
    if not isinstance(record, RunRecord):
        if args.baseline:
            raise PerfsuiteError(
                f"{args.run} is an A/B record: it holds both sides, so --baseline has no place"
            )
        from perfsuite.report.ab import page

        write_text_atomic(out, page(record))
        print(f"HTML report: {out}")
        return outcome.EXIT_OK
    baseline = records.load_record(Path(args.baseline)) if args.baseline else None
    if baseline is not None:  # judged against it, as compare would be: the same checks
        distinct_inputs([args.baseline, args.run], [baseline, record])
        comparable([baseline], record)
    history = []
    profile = str(record.hardware_profile.get("name"))
    if args.report_dir and (Path(args.report_dir) / profile).is_dir():
        history = readable_history(Path(args.report_dir), profile)
    write_text_atomic(out, render(record, baseline=baseline, history=history))
    print(f"HTML report: {out}")
    return outcome.EXIT_OK


def accept_command(args: argparse.Namespace) -> int:
    record = records.load_record(Path(args.run))
    if record.incomplete:
        raise PerfsuiteError(
            f"{args.run}: the run is incomplete ({record.incomplete}); an incomplete run never "
            "becomes a baseline"
        )
    if record.crashed and not args.k:
        names = ", ".join(short_id(c.id) for c in record.crashed[:3])
        raise PerfsuiteError(
            f"{args.run}: {len(record.crashed)} check(s) crashed in this run ({names}), so it "
            "is not a whole baseline; accept the checks that measured with -k"
        )
    chosen = [r for r in record.results if not args.k or any(k in r.id for k in args.k)]
    if not chosen:
        raise PerfsuiteError(f"{args.run}: no result matches -k {' '.join(args.k)}")
    name = record.hardware_profile.get("name")
    if not isinstance(name, str):
        raise PerfsuiteError(f"{args.run}: the run record names no hardware profile")
    profile = safe_profile_name(name)
    store = BaselineStore(Path(args.baseline_dir), args.runs)
    path, saved = store.save(
        profile,
        chosen,
        record.run_id,
        record.environment,
        policy=record.settings.get("policy"),
        created=record.created,  # when it measured: runs accepted together stay apart
    )
    print(f"accepted {saved} result(s) of run {record.run_id} into {path}")
    kept = store.kept(profile)
    if kept:
        print(f"previous baseline kept as {kept[-1]}")
    return outcome.EXIT_OK


def add_report_parser(sub: Any) -> None:
    """The ``report`` command's arguments."""
    rep = sub.add_parser(
        "report",
        help="render a run record as a self-contained HTML report",
        description=(
            "Render one run record as a self-contained HTML page: each check's verdicts, "
            "samples and explanation, with sparklines from the profile's earlier runs under "
            "--report-dir, and, with --baseline, another run of the same profile as ghosts and "
            "an environment diff. Given the record of a perfsuite ab (its ab.json), render the "
            f"A/B's page again, as the A/B wrote it. Exit status: {outcome.EXIT_OK} written, "
            f"{outcome.EXIT_USAGE} usage error (the table below)."
        ),
    )
    rep.add_argument(
        "run", metavar="RUN.json", type=path_arg, help="the run record (or ab.json) to render"
    )
    rep.add_argument(
        "--baseline",
        type=path_arg,
        metavar="RUN.json",
        help="another run of the same profile: ghosts and environment diff (default: none)",
    )
    rep.add_argument(
        "--report-dir",
        type=path_arg,
        default="reports",
        metavar="DIR",
        help="the run records whose history draws the sparklines (default: reports)",
    )
    rep.add_argument(
        "-o",
        "--output",
        type=path_arg,
        metavar="FILE",
        help="the page to write (default: RUN.html beside RUN.json)",
    )
    rep.set_defaults(func=report_command)


def add_baseline_parser(sub: Any) -> None:
    """The ``baseline accept`` command's arguments."""
    base = sub.add_parser("baseline", help="manage baselines")
    base_sub = base.add_subparsers(dest="baseline_command", required=True)
    accept = base_sub.add_parser(
        "accept",
        help="promote a run record to its profile's baseline",
        description=(
            "Add a run's results to the baseline of the hardware profile it ran on, keeping "
            "the last K accepted runs of each check; the previous baseline file is kept beside "
            f"it. Exit status: {outcome.EXIT_OK} accepted, {outcome.EXIT_USAGE} usage error "
            "(the table below)."
        ),
    )
    accept.add_argument("run", metavar="RUN.json", type=path_arg, help="the run record to accept")
    only_checks(accept)
    accept.add_argument(
        "--baseline-dir",
        type=path_arg,
        default="baselines",
        metavar="DIR",
        help="where baselines are kept, one folder per profile (default: baselines)",
    )
    accept.add_argument(
        "--runs",
        type=window_arg,
        default=None,
        metavar="K",
        help=f"accepted runs kept per check, {MIN_WINDOW} to {MAX_WINDOW} (default: the "
        f"window the baseline was written with, {DEFAULT_WINDOW} for a new one)",
    )
    accept.set_defaults(func=accept_command)
