"""The ``perfsuite`` command; each command's module declares its own arguments.

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
from perfsuite.cli.args import Parser, with_exit_table
from perfsuite.cli.compare import add_compare_parser
from perfsuite.cli.fleet import add_fleet_parser
from perfsuite.cli.history import add_history_parser
from perfsuite.cli.profiles import add_profiles_parsers
from perfsuite.cli.report import add_baseline_parser, add_report_parser
from perfsuite.cli.store import add_store_parser
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome

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
    add_profiles_parsers(sub)
    add_compare_parser(sub)
    add_ab_parser(sub)
    add_bisect_parser(sub)
    add_fleet_parser(sub)
    add_report_parser(sub)
    add_history_parser(sub)
    add_store_parser(sub)
    add_baseline_parser(sub)
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
