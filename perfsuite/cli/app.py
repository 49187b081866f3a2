"""The ``perfsuite`` command.

* ``perfsuite profiles [show NAME]``: list hardware profiles, or print one;
* ``perfsuite backends``: the backends ``--perf-backend`` accepts, and which are installed;
* ``perfsuite compare A.json B.json [--html FILE] [--passes N]``: the pre-upgrade A/B table and
  environment diff;
* ``perfsuite report RUN.json [--baseline RUN.json] [-o FILE]``: render the HTML report;
* ``perfsuite history``: each check's trend over the run records, with change points;
* ``perfsuite baseline accept RUN.json [-k TEXT]``: promote a run to its profile's baseline;
* ``perfsuite fleet run [--nodes N | --nodelist H,H | --hostfile FILE] -- PYTEST ARGS``: the
  suite on every node (or on those named);
* ``perfsuite fleet report DIR [--confirm DIR2]``: each node against its fleet, the slow ones
  to drain (confirmed by a rerun of them).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from perfsuite import __version__
from perfsuite.cli.ab import add_ab_parser, add_bisect_parser
from perfsuite.cli.args import (
    Parser,
    add_family_options,
    duration_arg,
    fraction,
    only_checks,
    outcomes_fail_on,
    path_arg,
    positive,
    verdicts_fail_on,
    window_arg,
    with_exit_table,
)
from perfsuite.cli.compare import compare_command
from perfsuite.cli.fleet import add_fleet_parser
from perfsuite.cli.history import history_command
from perfsuite.cli.profiles import backends_command, profiles_command
from perfsuite.cli.report import accept_command, report_command
from perfsuite.cli.store import add_store_parser
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome, stats
from perfsuite.judge import trends as hist
from perfsuite.model.baseline import DEFAULT_WINDOW, MAX_WINDOW, MIN_WINDOW

EXAMPLES = """\
examples:
  perfsuite profiles                      list hardware profiles, and what auto means here
  perfsuite profiles show h100-sxm        print one profile's figures
  perfsuite backends                      the backends --perf-backend accepts, installed or not
  perfsuite compare a1.json a2.json a3.json new.json
                                          pre-upgrade A/B (3+ runs before): exit 1 on a regression
  perfsuite compare a1.json a2.json b.json --html ab.html
  perfsuite compare a1.json a2.json a3.json a4.json b1.json b2.json --passes 2
  perfsuite ab --a .venv-old --b .venv-new -- suites/ -k "gemm or stream"
                                          interleaved A/B of two stacks, in rounds, paired
  perfsuite ab --a "tensorflow-cpu==2.20.*" --b "tensorflow-cpu==2.21.*" --budget 20m
  perfsuite report reports/a100/RUN.json  render a run record as HTML
  perfsuite history -k gemm               trends and change points of this machine's runs
  perfsuite baseline accept reports/a100/RUN.json -k tensorflow
  perfsuite fleet run --nodes 64 --dir /shared/fleet -- suites/ --perf-quick
                                          the suite on 64 nodes, one record each
  perfsuite fleet report /shared/fleet    the slow nodes, worst first (unconfirmed), and the
                                          command that reruns them into /shared/fleet/confirm
  perfsuite fleet report /shared/fleet --confirm /shared/fleet/confirm
                                          drain only the nodes slow again: exit 1 when one is

"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``perfsuite`` command."""
    parser = Parser(
        prog="perfsuite",
        description="Inspect, compare and accept perfsuite runs (the checks run under pytest).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    parser.add_argument(
        "--version", action="version", version=f"perfsuite {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    profiles = sub.add_parser(
        "profiles",
        help="list hardware profiles, or show one",
        description=(
            "List the hardware profiles perfsuite knows (built in, and those in --profile-dir), "
            "with their memory bandwidth and fp32 peak, and what 'auto' resolves to on this "
            "machine; or print one profile's figures as TOML. Exit status: "
            f"{outcome.EXIT_OK} listed, {outcome.EXIT_USAGE} usage error (a bad or unknown "
            "profile; the table below)."
        ),
    )
    profiles.add_argument(
        "action",
        nargs="?",
        choices=["list", "show"],
        default="list",
        help="list every profile (the default), or show one profile's figures",
    )
    profiles.add_argument(
        "name", nargs="?", help="with show: a profile name, or 'auto' for this host"
    )
    profiles.add_argument(
        "--profile-dir",
        type=path_arg,
        action="append",
        default=[],
        metavar="DIR",
        help="an extra directory of profile TOML files; repeat for more (default: none)",
    )
    profiles.set_defaults(func=profiles_command)

    backends = sub.add_parser(
        "backends",
        help="list the backends --perf-backend accepts, and which are installed",
        description=(
            "List every framework backend --perf-backend accepts and every collective library "
            "the allreduce checks launch ranks with, whether each is installed here, and how "
            f"to install the missing ones. Exit status: {outcome.EXIT_OK} listed (the table "
            "below)."
        ),
    )
    backends.set_defaults(func=backends_command)

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

    add_ab_parser(sub)
    add_bisect_parser(sub)
    add_fleet_parser(sub)

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
    add_store_parser(sub)

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
    return with_exit_table(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; user errors print one line and exit with the usage status."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except PerfsuiteError as exc:
        print(f"perfsuite: error: {exc}", file=sys.stderr)
        return outcome.EXIT_USAGE
    except KeyboardInterrupt:  # outside the rounds (an environment build, a preflight)
        print("perfsuite: interrupted", file=sys.stderr)
        return outcome.EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (``| head``): not an error of ours
        sys.stderr.close()
        return outcome.EXIT_OK
    except Exception:  # a defect of perfsuite's: never read as a regression (exit 1)
        traceback.print_exc()
        print("perfsuite: internal error: please report the traceback above", file=sys.stderr)
        return outcome.EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
