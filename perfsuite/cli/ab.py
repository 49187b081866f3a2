"""``perfsuite ab`` and ``perfsuite bisect``: two stacks in rounds, and the release that broke."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from perfsuite.cli.args import add_family_options, fraction, positive, verdicts_fail_on
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome


def _ab_options(args: argparse.Namespace, a: str, b: str) -> Any:
    from perfsuite.ab import rounds
    from perfsuite.ab import run as ab_run

    pytest_args = tuple(args.pytest_args)
    if not pytest_args:
        if not Path("suites").is_dir():
            raise PerfsuiteError("perfsuite ab: give the suite after --, e.g. -- suites/ -k gemm")
        pytest_args = ("suites/",)
    try:
        plan = rounds.Plan(
            min_rounds=args.min_rounds,
            max_rounds=args.max_rounds,
            budget_s=ab_run.parse_budget(args.budget),
            alpha=args.alpha,
            correction=args.correction,
            tolerance=args.tolerance,
            seed=args.seed,
            interleave=args.interleave,
        )
    except ValueError as exc:  # --min-rounds, --max-rounds, --budget
        raise PerfsuiteError(f"--min-rounds/--max-rounds: {exc}") from None
    return ab_run.Options(
        a=a,
        b=b,
        pytest_args=pytest_args,
        plan=plan,
        a_env=ab_run.parse_env(args.a_env, "--a-env"),
        b_env=ab_run.parse_env(args.b_env, "--b-env"),
        samples=args.samples,
        sample_seconds=args.sample_seconds,
        side_timeout_s=args.side_timeout,
        output_dir=Path(args.output_dir),
        cache=Path(args.cache_dir) if args.cache_dir else None,
        fail_on=args.fail_on,
        html=args.html == "yes",
        sides=args.sides,
    )


def ab_command(args: argparse.Namespace) -> int:
    from perfsuite.ab import run as ab_run
    from perfsuite.report.ab import summary_lines

    try:
        result = ab_run.run(_ab_options(args, args.a, args.b))
    except OSError as exc:  # the output folder or the cache: full disk, no permission
        raise PerfsuiteError(f"perfsuite ab: {exc}") from None
    except KeyboardInterrupt:  # before the rounds: resolving the stacks, the preflight
        print("perfsuite ab: interrupted before the first round; nothing to record", flush=True)
        return outcome.EXIT_INTERRUPTED
    for line in summary_lines(result):
        print(line)
    return result.exit_status


def add_ab_parser(sub: Any) -> None:
    ab = sub.add_parser(
        "ab",
        help="interleaved A/B of two stacks: rounds of fresh processes, judged in pairs",
        description=(
            "Run the selected checks under two stacks, alternated in rounds of fresh processes "
            "(balanced random order), and judge each check on its rounds' ratios B/A. A stack "
            "is an interpreter or venv, tox:NAME, or requirements that perfsuite builds into a "
            "cached environment. Everything after -- goes to pytest on both sides. Exit status: "
            f"{outcome.EXIT_OK} no regression, {outcome.EXIT_REGRESSED} regression or B failed "
            f"on a check A measured, {outcome.EXIT_USAGE} usage error, "
            f"{outcome.EXIT_INCONCLUSIVE} undecided, {outcome.EXIT_INTERRUPTED} interrupted "
            "(SIGINT, SIGTERM, SIGHUP: the rounds so far are recorded)."
        ),
    )
    ab.add_argument(
        "--a",
        required=True,
        metavar="STACK",
        help="the old stack, the reference: an interpreter or venv, tox:NAME, or requirements "
        "(required)",
    )
    ab.add_argument("--b", required=True, metavar="STACK", help="the new stack, judged (required)")
    _round_options(ab, "ab")
    ab.set_defaults(func=ab_command)


def bisect_command(args: argparse.Namespace) -> int:
    from perfsuite.ab import bisect

    options = bisect.BisectOptions(
        package=args.package,
        good=args.good,
        bad=args.bad,
        with_requirements=tuple(args.with_requirements),
        ab=_ab_options(args, "", ""),
        output_dir=Path(args.output_dir),
    )
    try:
        search = bisect.bisect(options)
    except OSError as exc:
        raise PerfsuiteError(f"perfsuite bisect: {exc}") from None
    except KeyboardInterrupt:  # listing the releases, before the first step
        print("perfsuite bisect: interrupted before the first step; nothing to record")
        return outcome.EXIT_INTERRUPTED
    for line in bisect.summary_lines(search):
        print(line)
    return search.exit_status


def add_bisect_parser(sub: Any) -> None:
    bis = sub.add_parser(
        "bisect",
        help="find the first release of a package that made a check slower",
        description=(
            "List the releases of a package from --good to --bad on the index, build a cached "
            "environment for each release needed, and binary-search with perfsuite ab. Exit "
            f"status: {outcome.EXIT_OK} nothing regressed, {outcome.EXIT_REGRESSED} a first bad "
            f"release found, {outcome.EXIT_USAGE} usage error, {outcome.EXIT_INCONCLUSIVE} "
            f"undecided, {outcome.EXIT_INTERRUPTED} interrupted (SIGINT, SIGTERM, SIGHUP: the "
            "steps so far are recorded)."
        ),
    )
    bis.add_argument("--package", required=True, help="the package, e.g. tensorflow-cpu (required)")
    bis.add_argument(
        "--good", required=True, metavar="VERSION", help="a release known good (required)"
    )
    bis.add_argument(
        "--bad", required=True, metavar="VERSION", help="a release known bad (required)"
    )
    bis.add_argument(
        "--with",
        dest="with_requirements",
        action="append",
        default=[],
        metavar="REQUIREMENT",
        help="another requirement of every environment, e.g. 'numpy<2'; repeatable (default: none)",
    )
    _round_options(bis, "bisect")
    bis.set_defaults(func=bisect_command)


def _round_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of the rounds, shared by ab and bisect (``command``), defaults shown.

    The rounds and their judging here, then each side's (:func:`_side_options`) and the
    output's (:func:`_output_options`), in the order ``--help`` lists them.
    """
    p.add_argument(
        "--budget",
        default="10m",
        metavar="DURATION",
        help="machine time for the rounds"
        + (" of each step" if command == "bisect" else "")
        + ": 10m, 600s, 1h (default: 10m)",
    )
    p.add_argument(
        "--min-rounds",
        type=positive,
        default=3,
        metavar="N",
        help="rounds before judging, at least 2 (default: 3)",
    )
    p.add_argument(
        "--max-rounds",
        type=positive,
        default=20,
        metavar="N",
        help="round cap: the rounds stop here even with budget left (default: 20)",
    )
    p.add_argument(
        "--tolerance",
        type=fraction,
        default=None,
        help="smallest change that counts, a fraction such as 0.05 (default: each check's own)",
    )
    add_family_options(p, "significance", verdicts_fail_on, "regressed, improved, unknown")
    _side_options(p)
    _output_options(p, command)


def _side_options(p: argparse.ArgumentParser) -> None:
    """How each side runs: its variables, samples, time limit, and the turns they take."""
    from perfsuite.ab import run as ab_run
    from perfsuite.ab.rounds import INTERLEAVES

    p.add_argument(
        "--a-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable for A, repeatable (default: none)",
    )
    p.add_argument(
        "--b-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable for B, repeatable (default: none)",
    )
    p.add_argument(
        "--samples",
        type=positive,
        default=ab_run.SIDE_SAMPLES,
        metavar="N",
        help=f"samples per check per side, at least 3 (default: {ab_run.SIDE_SAMPLES})",
    )
    p.add_argument(
        "--sample-seconds",
        type=float,
        default=ab_run.SIDE_SAMPLE_SECONDS,
        metavar="SECONDS",
        help=f"least seconds per sample, at most 60 (default: {ab_run.SIDE_SAMPLE_SECONDS})",
    )
    p.add_argument(
        "--side-timeout",
        type=float,
        default=ab_run.SIDE_TIMEOUT_S,
        metavar="SECONDS",
        help="a side still running after this is killed and its round recorded as failed "
        f"(default: {ab_run.SIDE_TIMEOUT_S:.0f})",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="seed of the round order (default: random)"
    )
    p.add_argument(
        "--interleave",
        choices=list(INTERLEAVES),
        default="samples",
        help="samples: each round starts both sides at once and they take turns "
        "sample by sample within each check; checks: the same, check by check, so a check's "
        "two readings are a second apart; processes: one side's process runs its checks, then "
        "the other's (default: samples)",
    )
    p.add_argument(
        "--sides",
        choices=["forked", "fresh"],
        default="forked",
        help="forked: each side's interpreter loads pytest and the frameworks once, and each "
        "round's side is a fresh fork of it; fresh: each round starts a new python process, "
        "its imports paid every round (default: forked)",
    )


def _output_options(p: argparse.ArgumentParser, command: str) -> None:
    """Where the records and environments go, and the pytest arguments of both sides."""
    output_dir = "reports/bisect" if command == "bisect" else "reports/ab"
    p.add_argument(
        "--output-dir",
        default=output_dir,
        metavar="DIR",
        help=(
            "records, pages and side logs, in a folder per run"
            + (" (each step's A/B in a folder of its own)" if command == "bisect" else "")
            + f" (default: {output_dir})"
        ),
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where built environments are kept (default: $PERFSUITE_CACHE, else "
        "$XDG_CACHE_HOME/perfsuite, else ~/.cache/perfsuite)",
    )
    p.add_argument(
        "--html",
        choices=["yes", "no"],
        default="yes",
        help=(
            "also write each step's ab.html; bisect.html is always written (default: yes)"
            if command == "bisect"
            else "write ab.html beside ab.json (default: yes)"
        ),
    )
    p.add_argument(
        "pytest_args",
        nargs="*",
        metavar="-- PYTEST ARGS",
        help="everything after -- goes to pytest on both sides: the suite and its selection "
        "(default: suites/ where there is one)",
    )
