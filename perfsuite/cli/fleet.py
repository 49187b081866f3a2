"""``perfsuite fleet run`` and ``fleet report``: every node, and the slow ones to drain."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfsuite.cli.args import fraction, positive
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome
from perfsuite.store.files import write_json_atomic, write_text_atomic


def _fleet_path(what: str, text: str) -> Path:
    """A path option of a fleet command: not empty (the cwd, by accident), no control codes."""
    from perfsuite.fleet.labels import check_text

    return check_text(what, text)


def fleet_report_command(args: argparse.Namespace) -> int:
    from perfsuite.fleet import judge
    from perfsuite.fleet.assess import assess, check_outputs, distinct

    directory = _fleet_path("fleet report DIR", args.dir)
    confirm = distinct(tuple(_fleet_path("--confirm", d) for d in args.confirm))
    drain = directory / "drain.json" if args.drain is None else _fleet_path("--drain", args.drain)
    html = (
        None
        if args.html == ""
        else directory / "fleet.html"
        if args.html is None
        else _fleet_path("--html", args.html)
    )
    check_outputs(directory, confirm, drain, html)
    from perfsuite.fleet.drain import drain_list
    from perfsuite.report import fleet as report
    from perfsuite.report import fleet_page

    rule = judge.Rule(alpha=args.alpha, tolerance=args.tolerance, min_spread=args.min_spread)
    fleet = assess(directory, rule, confirm=confirm)
    try:
        write_json_atomic(drain, drain_list(fleet))
        if html is not None:
            write_text_atomic(html, fleet_page.page(fleet))
    except OSError as exc:
        raise PerfsuiteError(f"perfsuite fleet report: cannot write: {exc}") from None
    for line in report.terminal_lines(fleet, str(drain), "" if html is None else str(html)):
        print(line)
    return fleet.exit_status


def fleet_run_command(args: argparse.Namespace) -> int:
    from perfsuite.fleet import run as fleet_run
    from perfsuite.fleet.options import Options
    from perfsuite.measure import processes

    try:
        with processes.interruptible():
            if args.nodelist is not None and not args.nodelist:
                raise fleet_run.FleetError("--nodelist '': name the hosts, or leave it out")
            options = Options(
                directory=_fleet_path("--dir", args.dir),
                pytest_args=tuple(args.pytest_args) or ("suites/",),
                nodes=args.nodes,
                tasks_per_node=args.tasks_per_node,
                hostfile=None
                if args.hostfile is None
                else _fleet_path("--hostfile", args.hostfile),
                timeout_s=args.timeout,
                launch_timeout_s=args.launch_timeout,
                launcher_args=tuple(args.launcher_arg),
                nodelist=fleet_run.parse_nodelist(args.nodelist) if args.nodelist else (),
            )
            result = fleet_run.run(options)
    except processes.Interrupted as signalled:  # before the launcher started: nothing ran
        print(f"perfsuite: interrupted ({signalled.name}); no task was started", file=sys.stderr)
        return outcome.EXIT_INTERRUPTED
    for line in fleet_run.summary_lines(result):
        print(line)
    return result.exit_status


def _fleet_seconds(what: str) -> Any:
    """An argparse type: seconds above 0, finite, at most a week (fleet.options.MAX_TIMEOUT_S)."""

    def parse(text: str) -> float:
        from perfsuite.fleet.labels import FleetError
        from perfsuite.fleet.options import parse_seconds

        try:
            return parse_seconds(what, text)
        except FleetError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


_FLEET_RUN_EXITS = (
    f"Exit status: {outcome.EXIT_OK} every node wrote its record, {outcome.EXIT_REGRESSED} a "
    f"node failed, {outcome.EXIT_USAGE} usage error, {outcome.EXIT_INTERRUPTED} interrupted "
    "(SIGINT, SIGTERM, SIGHUP: the launcher and every process it started are ended first)."
)


_FLEET_REPORT_EXITS = (
    f"Exit status: {outcome.EXIT_OK} no node flagged (or none confirmed) and none to rerun, "
    f"{outcome.EXIT_REGRESSED} a node slow or failed, {outcome.EXIT_USAGE} usage error, "
    f"{outcome.EXIT_INCONCLUSIVE} a node to rerun and none slow or failed."
)


def add_fleet_parser(sub: Any) -> None:
    fleet = sub.add_parser(
        "fleet",
        help="run the suite on every node; judge nodes by their fleet",
        description="Run the suite on every node of a cluster (fleet run), then judge each "
        "node against its fleet and list the slow ones to drain (fleet report).",
    )
    fleet_sub = fleet.add_subparsers(
        dest="fleet_command",
        required=True,
        metavar="{run,report}",
        help="run: the suite on every node; report: each node judged against its fleet",
    )
    run = fleet_sub.add_parser(
        "run",
        help="start the suite on every node of a Slurm allocation, or of a hostfile",
        description=(
            "One task per node (srun inside an allocation, sbatch with a generated script "
            "outside one, mpiexec with --hostfile where there is no Slurm). Each task writes "
            "its run record into DIR, labelled with its node; a task that fails or hangs "
            "(--timeout) is reported with its output and never stops the others. To confirm a "
            "report's flags, rerun its candidates with --nodelist into DIR/confirm (the report "
            "prints the command). Host names (a hostfile, --nodelist) must follow hostname "
            "grammar: letters, digits, '-' and '.'. " + _FLEET_RUN_EXITS
        ),
    )
    run.add_argument(
        "--dir",
        required=True,
        help="the shared directory every node writes to (required; not '', no control "
        "characters, nor '%%' or '\\' with sbatch; DIR/nodes/ keeps the tasks' statuses and "
        "output)",
    )
    run.add_argument(
        "--nodes", type=positive, default=None, help="nodes (default: the allocation's)"
    )
    run.add_argument(
        "--tasks-per-node",
        type=positive,
        default=1,
        metavar="T",
        help="tasks per node, each labelled host-tINDEX (default 1)",
    )
    run.add_argument(
        "--hostfile",
        default=None,
        metavar="FILE",
        help="hosts for mpiexec, 'host' or 'host:slots' a line, '#' comments, each host once "
        "(slots are not used: --tasks-per-node sets the tasks) (no Slurm; default: none, Slurm "
        "launches)",
    )
    run.add_argument(
        "--nodelist",
        default=None,
        metavar="HOST,HOST",
        help="only these hosts (srun -w, sbatch --nodelist, or these lines of --hostfile): "
        "how a report's flagged nodes are run again to confirm them (default: every node)",
    )
    run.add_argument(
        "--timeout",
        type=_fleet_seconds("--timeout"),
        default=1800.0,
        metavar="SECONDS",
        help="a node's suite still running after this is killed and reported; above 0, at "
        "most 604800 (a week) (default 1800)",
    )
    run.add_argument(
        "--launch-timeout",
        type=_fleet_seconds("--launch-timeout"),
        default=None,
        metavar="SECONDS",
        help="the launcher as a whole, then it and every process it started are ended; above "
        "0, at most 604800 (default: --timeout + 300, for queueing and start-up)",
    )
    run.add_argument(
        "--launcher-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument for srun, sbatch or mpiexec, e.g. --partition=gpu; repeat for "
        "more (default: none)",
    )
    run.add_argument(
        "pytest_args",
        nargs="*",
        metavar="-- PYTEST ARGS",
        help="what each node's pytest runs (default: suites/)",
    )
    run.set_defaults(func=fleet_run_command)

    rep = fleet_sub.add_parser(
        "report",
        help="judge each node against its fleet; list the slow ones to drain",
        description=(
            "Compare every node (and GPU) with the median of its fleet, profile by profile. "
            "Readings a node's own run flagged (foreign load, a throttled GPU) are left out "
            "and never drain it: it is listed to rerun. One run's flags are unconfirmed: rerun "
            "the flagged nodes (the report prints the command) and pass the rerun with "
            "--confirm; only nodes slow again are drained. Writes DIR/drain.json (the nodes to "
            "drain, those not confirmed, and those to rerun) and DIR/fleet.html. "
            + _FLEET_REPORT_EXITS
        ),
    )
    rep.add_argument(
        "dir",
        metavar="DIR",
        help="the fleet's shared directory of run records, or a results store (each node's "
        "latest run in it) (not '')",
    )
    rep.add_argument(
        "--confirm",
        action="append",
        default=[],
        metavar="DIR2",
        help="a rerun of the flagged nodes (fleet run --nodelist ... --dir DIR/confirm): each "
        "is judged against DIR's fleet, and drained only when slow again; repeat for later "
        "reruns, oldest first: each judges only the nodes the ones before left standing "
        "(confirmed, or to rerun); one named twice counts once; never DIR's own records "
        "(default: none, the report is unconfirmed)",
    )
    rep.add_argument(
        "--alpha",
        type=fraction,
        default=0.01,
        help="false alarms over the whole fleet, nodes x checks, per profile (default 0.01)",
    )
    rep.add_argument(
        "--tolerance",
        type=fraction,
        default=0.10,
        help="the least shortfall from the fleet median that counts (default 0.10)",
    )
    rep.add_argument(
        "--min-spread",
        type=fraction,
        default=0.01,
        help="the least node-to-node spread assumed, relative: a floor under the MAD "
        "(default 0.01)",
    )
    rep.add_argument(
        "--drain",
        metavar="FILE",
        help="the drain list (default DIR/drain.json); never an input of the report, nor "
        "the --html page",
    )
    rep.add_argument(
        "--html",
        metavar="FILE",
        help="the page (default DIR/fleet.html; '' for none); never an input of the report",
    )
    rep.set_defaults(func=fleet_report_command)
