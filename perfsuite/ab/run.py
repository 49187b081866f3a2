"""``perfsuite ab``: resolve both stacks, run the rounds, judge, save and report."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfsuite.ab import (
    Outcome,
    broken_by_b,
    decide_exit,
    first_environment,
    gather,
    new_run_id,
    paired,
    save,
    side_diff,
    unfingerprinted,
)
from perfsuite.ab import stacks as stacks_mod
from perfsuite.ab.forks import WarmSides
from perfsuite.ab.launch import SideCommand, process_runner
from perfsuite.ab.rounds import (
    Plan,
    RoundRunner,
    Session,
    SideRun,
    one_then_the_other,
    run_rounds,
    short_budget,
    verdict,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.measure import processes
from perfsuite.report.ab import round_load_words, short_budget_words
from perfsuite.report.terminal import clock
from perfsuite.settings import MAX_SAMPLE_SECONDS, MIN_SAMPLES, duration, duration_text

# What each side's pytest gets besides the user's arguments: quick mode, brief samples, no
# stored baseline (the other side is the reference), no HTML per side.
SIDE_SAMPLES = 3
SIDE_SAMPLE_SECONDS = 0.05
SIDE_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Options:
    """What the user asked for."""

    a: str
    b: str
    pytest_args: tuple[str, ...]
    plan: Plan
    a_env: Mapping[str, str] = field(default_factory=dict)
    b_env: Mapping[str, str] = field(default_factory=dict)
    samples: int = SIDE_SAMPLES
    sample_seconds: float = SIDE_SAMPLE_SECONDS
    side_timeout_s: float = SIDE_TIMEOUT_S
    output_dir: Path = Path("reports/ab")
    cache: Path | None = None
    fail_on: frozenset[str] = frozenset({"regressed"})
    html: bool = True
    selection: tuple[str, ...] | None = None  # node ids to run from the first round (bisect)
    run_id: str = ""  # default: a new one
    # "forked": each round's sides are forks of warm interpreters (perfsuite.ab.forks);
    # "fresh": each is a new ``python -m pytest`` process, its imports paid every round.
    sides: str = "forked"


def side_args(options: Options, workdir: Path) -> list[str]:
    """The pytest arguments perfsuite adds on both sides."""
    empty = workdir / "no-baselines"
    empty.mkdir(parents=True, exist_ok=True)
    return [
        "-p",
        "perfsuite.ab.side",
        "-p",
        "no:cacheprovider",
        "-q",
        "--perf-quick",
        "--perf-samples",
        str(options.samples),
        "--perf-sample-seconds",
        str(options.sample_seconds),
        "--perf-baseline-dir",
        str(empty),
        "--perf-html",
        "no",
    ]


class _Progress:
    """A line per round, and a bar on a terminal: rounds done, checks undecided, time left."""

    def __init__(self, plan: Plan, say: Callable[[str], None]) -> None:
        self.say = say
        self.plan = plan
        self.spent_s = 0.0  # seconds of budget spent by the rounds so far
        self.budget_checked = False  # whether the budget's rounds were checked
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=plan.max_rounds, unit="round", file=sys.stderr, leave=False)

    def __call__(
        self, done: int, cap: int, undecided: int, left: float, runs: Sequence[SideRun]
    ) -> None:
        sides = ", ".join(
            f"{r.side} {r.own_seconds:.0f} s" + (f" FAILED ({r.failed})" if r.failed else "")
            for r in runs
        )
        left_out = round_load_words(runs)
        line = (
            f"round {done}/{cap}: {sides}; {undecided} undecided{left_out}; "
            f"{clock(left)} of budget left"
        )
        if self.bar is not None:
            self.bar.set_postfix_str(f"{undecided} undecided, {clock(left)} left")
            self.bar.update(1)
            self.bar.write(line, file=sys.stderr)
        else:
            self.say(line)
        short = self._short(done, self.plan.budget_s - left, runs)
        if short is not None:  # say it now, not when the budget has run out
            warning = short_budget_words(done, self.plan.budget_s, left, *short)
            if self.bar is not None:
                self.bar.write(warning, file=sys.stderr)
            else:
                self.say(warning)

    def _short(
        self, done: int, elapsed: float, runs: Sequence[SideRun]
    ) -> tuple[int, float, float] | None:
        """Once, after the first whole round past round 1: the rounds the budget holds, if few.

        Round 1 pays once for imports and first pages, so its pace would undercount the
        rounds; the next round whose sides both ran whole sets the pace (a side that failed
        early makes a round short).  Where not even a second round fits, it is said after
        round 1.
        """
        spent_before, self.spent_s = self.spent_s, elapsed
        if self.budget_checked:
            return None
        if done == 1:
            short = short_budget(elapsed, self.plan)
            if short is not None and short[0] < 2:
                self.budget_checked = True
                return (*short, elapsed)
            return None
        if any(r.failed for r in runs):
            return None
        self.budget_checked = True
        pace = elapsed - spent_before
        short = short_budget(elapsed, self.plan, pace, done)
        return (*short, pace) if short is not None else None

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(options: Options, say: Callable[[str], None] | None = None) -> Outcome:
    """Run the A/B and return what it found (the record and HTML are written).

    ``say`` gets each progress line (default: printed at once, so a CI log shows each round
    as it ends).  SIGINT, SIGTERM and SIGHUP end the rounds: every process the A/B started
    is ended, and the record holds the rounds so far, marked incomplete
    (:func:`perfsuite.measure.processes.interruptible`).  Before the rounds they raise
    KeyboardInterrupt.
    """
    with processes.interruptible():
        return _run(options, say)


# pytest options that make a side list, describe or collect instead of running its checks.
NOT_A_RUN = frozenset(
    {
        "--co",
        "--collect-only",
        "--collectonly",
        "--fixtures",
        "--fixtures-per-test",
        "--markers",
        "--help",
        "-h",
        "--version",
        "-V",
    }
)


def check_options(options: Options) -> None:
    """Refuse, before anything starts, what every side would refuse or cannot measure.

    The sides' plugin takes ``--perf-samples`` from :data:`MIN_SAMPLES` up and
    ``--perf-sample-seconds`` up to :data:`MAX_SAMPLE_SECONDS`; pytest arguments that
    collect or describe instead of running give no side anything to measure.
    """
    if not (isinstance(options.samples, int) and options.samples >= MIN_SAMPLES):
        raise PerfsuiteError(f"--samples {options.samples}: give a whole number >= {MIN_SAMPLES}")
    if not 0 < options.sample_seconds <= MAX_SAMPLE_SECONDS:
        raise PerfsuiteError(
            f"--sample-seconds {options.sample_seconds}: give seconds > 0 and "
            f"<= {MAX_SAMPLE_SECONDS:g}"
        )
    if not 0 < options.side_timeout_s < math.inf:
        raise PerfsuiteError(
            f"--side-timeout {options.side_timeout_s}: give a finite number of seconds > 0"
        )
    for arg in options.pytest_args:
        if arg.split("=", 1)[0] in NOT_A_RUN:
            raise PerfsuiteError(
                f"pytest argument {arg}: the sides would not run their checks; leave it out "
                "(pytest --co on the suite lists what an A/B would run)"
            )


# pytest's exit statuses that mean the arguments, not the stack, are wrong.
PYTEST_USAGE = 4
PYTEST_NO_TESTS = 5


def usage_problem(run: SideRun) -> str:
    """Why a side's first run says its pytest arguments are wrong ("" when they are not).

    pytest exits 4 on a usage error (an unknown option, a missing path, a value the plugin
    refuses) and 5 when no check was collected (``-k`` matched nothing): every round would
    fail alike, so the A/B stops after the first.
    """
    if run.readings or run.returncode not in (PYTEST_USAGE, PYTEST_NO_TESTS):
        return ""
    said = error_line(_read_log(run.log))
    if run.returncode == PYTEST_USAGE:
        return f"side {run.side}: pytest refused its arguments: {said} (log: {run.log})"
    return (
        f"side {run.side}: pytest collected no check to run (check -k, -m and the paths)"
        + (f": {said}" if said else "")
        + f" (log: {run.log})"
    )


def _read_log(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace") if path else ""
    except OSError:
        return ""


def error_line(output: str, limit: int = 300) -> str:
    """The line of a side's output that says what went wrong, printable, at most ``limit``.

    pytest's ``ERROR: ...`` or ``...: error: ...`` line, the last one; else the last line
    that is not empty.  Control characters (a terminal's escape codes) are dropped.
    """
    lines = ["".join(ch for ch in line if ch.isprintable()).strip() for line in output.splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if line.startswith("ERROR") or " error: " in line]
    chosen = (errors or lines or [""])[-1]
    chosen = chosen.removeprefix("ERROR:").strip()
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."


def refusing_usage_errors(run_round: RoundRunner) -> RoundRunner:
    """``run_round``, stopping the A/B after round 1 when a side's pytest refused its arguments.

    Raises :class:`PerfsuiteError` with the side's own error line: a usage error, never
    three rounds of failed sides read as "undecided".
    """

    def checked(
        rnd: int,
        order: tuple[str, str],
        selection: Sequence[str] | None,
        keep: Callable[[SideRun], None],
    ) -> None:
        def keep_checked(run: SideRun) -> None:
            keep(run)
            problem = usage_problem(run) if rnd == 1 else ""
            if problem:
                raise PerfsuiteError(problem)

        run_round(rnd, order, selection, keep_checked)

    return checked


def round_cap_note(plan: Plan) -> str:
    """A round cap too low to call a change, said before the rounds ("" for any other)."""
    if plan.max_rounds >= paired.MIN_SIGN_ROUNDS:
        return ""
    return (
        f"--max-rounds {plan.max_rounds}: a change is called from round "
        f"{paired.MIN_SIGN_ROUNDS} on, so these rounds can read same or unknown, never "
        "regressed or improved"
    )


def _run(options: Options, say: Callable[[str], None] | None) -> Outcome:
    say = say or functools.partial(print, flush=True)
    check_options(options)
    start = _prepare(options, say)
    say(
        f"A/B {start.run_id}: at least {options.plan.min_rounds} rounds, at most "
        f"{options.plan.max_rounds}, budget {duration_text(options.plan.budget_s)}; each round "
        f"{INTERLEAVE_WORDS[options.plan.interleave]}; record {start.record_path}"
    )

    cap = round_cap_note(options.plan)
    if cap:
        say(cap)

    def on_round(session: Session) -> None:
        save(start.outcome(options, session), start.record_path)

    started = time.monotonic()  # the budget counts the sides' warm-up too
    sides: WarmSides | None = None
    progress = _Progress(options.plan, say)
    try:
        sides = _warm_sides(options, start, say)
        run_round = refusing_usage_errors(_round_runner(options, start, started, sides))
        session = run_rounds(
            run_round, options.plan, progress, on_round, selection=options.selection
        )
    finally:
        progress.close()
        if sides is not None:
            sides.stop()
    stopped = stop_note(session, options.plan)
    if stopped:
        start.notes.append(stopped)
    result = start.outcome(options, session)
    save(result, start.record_path)
    if options.html:
        from perfsuite.report.ab import write_html

        result = write_html(result, start.workdir / "ab.html")
    return result


# How a round runs, for the line that opens the A/B (by ``Plan.interleave``).
INTERLEAVE_WORDS = {
    "samples": "both sides at once, taking turns sample by sample",
    "checks": "both sides at once, taking turns check by check",
    "processes": "one side's process, then the other's",
}


@dataclass
class _Start:
    """What an A/B knows before its first round: both stacks, where it writes, the notes."""

    run_id: str
    created: str
    stacks: dict[str, stacks_mod.Stack]
    same: bool
    workdir: Path
    extra: tuple[str, ...]  # the pytest arguments perfsuite adds on both sides
    commands: dict[str, SideCommand]
    before: dict[str, dict[str, Any]]  # each side's fingerprint from the preflight
    notes: list[str]

    @property
    def pins(self) -> tuple[Sequence[str], Sequence[str]]:
        """Each side's pinned requirements (a built stack's)."""
        return (self.stacks["A"].requirements, self.stacks["B"].requirements)

    @property
    def record_path(self) -> Path:
        """The A/B's record, rewritten after each round."""
        return self.workdir / "ab.json"

    def outcome(self, options: Options, session: Session) -> Outcome:
        """The A/B as it stands after ``session``'s rounds."""
        checks, only_in, unhealthy = gather(session.states, session.runs)
        broken = broken_by_b(session.runs)
        # The sides' own records know more (a loaded framework's CUDA build): prefer them.
        fa = first_environment(session.runs, "A") or self.before["A"]
        fb = first_environment(session.runs, "B") or self.before["B"]
        return Outcome(
            self.run_id,
            self.created,
            self.stacks,
            {"A": fa, "B": fb},
            side_diff(fa, fb, options.a_env, options.b_env, self.pins),
            self.same,
            options.plan,
            options.pytest_args,
            self.extra,
            session,
            checks,
            only_in,
            unhealthy,
            broken,
            options.fail_on,
            decide_exit(checks, session.incomplete, options.fail_on, broken),
            self.record_path,
            None,
            tuple(self.notes),
        )


def _prepare(options: Options, say: Callable[[str], None]) -> _Start:
    """Resolve both stacks, make the run's folder, and fingerprint each side before a round."""
    stacks = {}
    for side, spec, env in (("A", options.a, options.a_env), ("B", options.b, options.b_env)):
        try:
            stack = stacks_mod.resolve(spec, options.cache)
        except PerfsuiteError as exc:
            raise PerfsuiteError(f"--{side.lower()}: {exc}") from None
        stacks[side] = _with_env(stack, env)
        how = "cached" if stack.cached else f"built in {stack.built_s:.0f} s"
        built = f" ({how})" if stack.kind == "requirements" else ""
        say(f"{side}: {spec} -> {stack.python}{built}")
    same = same_stack(stacks["A"].python, stacks["B"].python, options.a_env, options.b_env)
    notes: list[str] = []
    if same:
        notes.append(
            "A and B are the same stack: this is an A/A run; any verdict but same or unknown "
            "is a false alarm"
        )
        say(notes[-1])
    run_id, created = new_run_id()
    run_id = options.run_id or run_id
    # Absolute: a side's pytest reads a relative folder against its own root (the tests'
    # project), which need not be where this command runs.
    workdir = (options.output_dir / run_id).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    extra = side_args(options, workdir)
    commands = {
        side: SideCommand(
            stacks[side].python, options.pytest_args, dict(env), options.side_timeout_s
        )
        for side, env in (("A", options.a_env), ("B", options.b_env))
    }
    before = {side: preflight_fingerprint(commands[side]) for side in ("A", "B")}
    start = _Start(run_id, created, stacks, same, workdir, tuple(extra), commands, before, notes)
    from perfsuite.report.ab import diff_lines

    first_diff = side_diff(before["A"], before["B"], options.a_env, options.b_env, start.pins)
    for line in diff_lines(first_diff, unfingerprinted(before)):
        say(line)
    return start


def _warm_sides(options: Options, start: _Start, say: Callable[[str], None]) -> WarmSides | None:
    """Both sides' warm interpreters (``--sides forked``), loaded before the first round.

    Whatever ends their use (a server that cannot load, or ends) is a note of the record,
    said when it happens.
    """
    if options.sides != "forked":
        return None

    def note(line: str) -> None:
        start.notes.append(line)
        say(line)

    begun = time.monotonic()
    sides = WarmSides(
        {side: (c.python, c.env) for side, c in start.commands.items()}, start.workdir, note
    )
    if sides.active:
        say(
            f"sides: warm interpreters ready in {time.monotonic() - begun:.0f} s; each round's "
            "side is a fork of its own, which imports the frameworks its first round imported"
        )
    return sides


def _round_runner(
    options: Options, start: _Start, started: float, sides: WarmSides | None
) -> RoundRunner:
    """How each round runs its two sides: in lockstep, or one process after the other.

    With warm sides, each server imports what its side's child imported after the round.
    """

    def seconds_left() -> float:
        return options.plan.budget_s - (time.monotonic() - started)

    extra = list(start.extra)
    if options.plan.interleave in ("samples", "checks"):
        from perfsuite.ab.lockstep import lockstep_runner

        per_sample = options.plan.interleave == "samples"
        run_round = lockstep_runner(
            start.commands, start.workdir, extra, seconds_left, per_sample, sides
        )
    else:
        run_round = one_then_the_other(
            process_runner(start.commands, start.workdir, extra, seconds_left, sides)
        )
    if sides is None:
        return run_round
    warm = sides

    def then_load(
        rnd: int,
        order: tuple[str, str],
        selection: Sequence[str] | None,
        keep: Callable[[SideRun], None],
    ) -> None:
        run_round(rnd, order, selection, keep)
        warm.between_rounds(rnd)

    return then_load


def stop_note(session: Session, plan: Plan) -> str:
    """Which limit ended rounds that left checks undecided, and the option that moves it.

    A session stopped at the round cap with budget left says ``--max-rounds``: a larger
    ``--budget`` alone would not have run one more round.
    """
    undecided = sum(1 for state in session.states.values() if verdict(state) == "unknown")
    left = plan.budget_s - session.seconds
    if session.stopped == "round cap":
        budget = f" with {left:.0f} s of the budget left" if left >= 1 else ""
        return (
            f"stopped at the round cap (--max-rounds {plan.max_rounds}){budget}; "
            f"{undecided} checks undecided: a larger --max-rounds lets more rounds decide them"
        )
    if session.stopped == "budget":
        return (
            f"stopped by the budget (--budget {duration_text(plan.budget_s)}) before round "
            f"{len(session.order) + 1}; {undecided} checks undecided: a larger --budget lets "
            "more rounds decide them"
        )
    return ""


def preflight_fingerprint(command: SideCommand) -> dict[str, Any]:
    """A side's environment fingerprint before any round (without importing its frameworks).

    Empty when the side cannot say (an old perfsuite); the rounds' records then supply it.
    """
    code = (
        "import json; from perfsuite.measure.environment import fingerprint; "
        "print(json.dumps(fingerprint()))"
    )
    try:
        done = processes.run(
            [command.python, "-c", code], timeout=300, env={**os.environ, **command.env}
        )
        data = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def same_stack(
    python_a: str, python_b: str, env_a: Mapping[str, str], env_b: Mapping[str, str]
) -> bool:
    """Whether both sides are one stack: the same interpreter path and the same variables.

    A virtual environment's python is a link to its base interpreter, so two environments
    resolve to one file: the path is compared as given, never resolved.
    """
    return os.path.abspath(python_a) == os.path.abspath(python_b) and dict(env_a) == dict(env_b)


def _with_env(stack: stacks_mod.Stack, env: Mapping[str, str]) -> stacks_mod.Stack:
    """The stack with the variables its side is given."""
    return replace(stack, env=tuple(sorted(env.items())))


def parse_budget(text: str) -> float:
    """``10m``, ``600s``, ``1h``, ``90`` (seconds) as seconds (:func:`settings.duration`)."""
    try:
        value = duration(text)
    except ValueError:
        raise PerfsuiteError(
            f"--budget {text!r}: give a duration such as 10m, 600s or 1h, above 0 and under "
            "10,000,000 s"
        ) from None
    if not value > 0:
        raise PerfsuiteError(f"--budget {text!r}: the budget must be a positive duration")
    return value


def parse_env(items: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` items as a mapping."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not name.replace("_", "").isalnum():
            raise PerfsuiteError(f"{flag} {item!r}: give NAME=VALUE")
        out[name] = value
    return out
