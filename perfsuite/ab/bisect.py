"""``perfsuite bisect``: the first release of a package that made a check slower.

The releases between a good and a bad version come from the package index (``pip index
versions``, which reads pip's configuration: its index, extra indexes and find-links).  Each
release perfsuite needs gets a cached environment (:mod:`perfsuite.ab.stacks`), and each step
is an interleaved A/B (:mod:`perfsuite.ab.run`):

1. good against bad, over the whole selection: the checks it calls regressed are the focus
   (none: "nothing regressed", and the search stops);
2. a binary search over the releases in between, each step the last release known good (A)
   against the middle one (B), on the focus checks only: a step where any focus check
   regressed moves the bad end, any other the good end.

A release that fails to install or to run is skipped with its reason, as ``git bisect skip``
does, and its neighbour is tried.  The first bad release is named with the A/B of the step
that found it; with ``n`` releases the search takes at most ``ceil(log2(n - 1)) + 1`` steps
when none is skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from perfsuite.ab import Outcome, new_run_id, stacks
from perfsuite.ab import run as ab_run
from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome
from perfsuite.measure import processes
from perfsuite.store.files import write_text_atomic

Lister = Callable[[str], list[str]]


def index_versions(package: str) -> list[str]:
    """Every release of ``package`` the index offers this interpreter (pip's view)."""
    try:
        done = processes.run(
            [sys.executable, "-m", "pip", "index", "versions", package], timeout=300
        )
    except subprocess.TimeoutExpired:
        raise PerfsuiteError(f"listing the releases of {package} took over 300 s") from None
    if "No module named pip" in done.stderr:
        raise PerfsuiteError(
            f"cannot list the releases of {package}: this interpreter has no pip "
            f"({sys.executable} -m ensurepip adds it)"
        )
    match = re.search(r"^Available versions:\s*(.+)$", done.stdout, re.M)
    if done.returncode != 0 or not match:
        errors = [
            line for line in (done.stdout + done.stderr).splitlines() if line.startswith("ERROR")
        ]
        why = errors[-1] if errors else "no versions listed"
        raise PerfsuiteError(f"package {package!r} is not on the index: {why}")
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def releases_between(package: str, good: str, bad: str, lister: Lister) -> list[Version]:
    """The releases from ``good`` to ``bad``, both included, oldest first."""
    for flag, text in (("--good", good), ("--bad", bad)):
        try:
            Version(text)
        except InvalidVersion:
            raise PerfsuiteError(f"bisect: {flag} {text!r} is not a version") from None
    lo, hi = Version(good), Version(bad)
    if lo == hi:
        raise PerfsuiteError(f"bisect: --good and --bad are the same version ({good})")
    if lo > hi:
        raise PerfsuiteError(f"bisect: --good {good} is newer than --bad {bad}")
    listed = []
    for text in lister(package):
        try:
            listed.append(Version(text))
        except InvalidVersion:
            continue
    pre = lo.is_prerelease or hi.is_prerelease
    between = sorted({v for v in listed if lo <= v <= hi and (pre or not v.is_prerelease)})
    for end, name in ((lo, "--good"), (hi, "--bad")):
        if end not in between:
            near = ", ".join(str(v) for v in sorted(listed)[-8:])
            raise PerfsuiteError(
                f"bisect: {package} {end} ({name}) is not on the index; recent releases: {near}"
            )
    if len(between) < 2:
        raise PerfsuiteError(f"bisect: no releases of {package} between {good} and {bad}")
    return between


@dataclass(frozen=True)
class Step:
    """One A/B of the search."""

    a: str
    b: str
    regressed: tuple[str, ...]  # focus checks B regressed
    undecided: tuple[str, ...]  # checks left unknown
    verdicts: dict[str, tuple[str, float | None]]  # check -> (verdict, ratio B/A)
    record: str
    seconds: float
    rounds: int
    skipped: str = ""  # why this release could not be judged
    interrupted: bool = False  # the step's A/B was interrupted: it decided nothing

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "a": self.a,
            "b": self.b,
            "regressed": list(self.regressed),
            "undecided": list(self.undecided),
            "verdicts": {k: {"verdict": v, "ratio": r} for k, (v, r) in self.verdicts.items()},
            "record": self.record,
            "seconds": round(self.seconds, 1),
            "rounds": self.rounds,
            "skipped": self.skipped,
            "interrupted": self.interrupted,
        }


@dataclass
class Search:
    """The bisection so far."""

    package: str
    releases: list[str]
    steps: list[Step] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    builds: list[dict[str, Any]] = field(default_factory=list)  # release, seconds, cached
    focus: tuple[str, ...] = ()
    first_bad: str = ""
    last_good: str = ""
    evidence: int | None = None  # index of the step that names first_bad
    range: tuple[str, str] | None = None  # (last good, first known bad) when all between skipped
    seconds: float = 0.0
    incomplete: str = ""

    @property
    def exit_status(self) -> int:
        """The bisection's exit status (the constants of :mod:`perfsuite.judge.outcome`).

        ``EXIT_INTERRUPTED`` when it was interrupted (its answer is unknown, whatever step 1
        saw); ``EXIT_REGRESSED`` a first bad release named; ``EXIT_INCONCLUSIVE`` a
        regression whose first bad release was not found, or checks left undecided;
        ``EXIT_OK`` nothing regressed and every check decided.
        """
        if self.incomplete:
            return outcome.EXIT_INTERRUPTED
        if self.first_bad:
            return outcome.EXIT_REGRESSED
        if self.focus or not self.steps or self.steps[0].undecided:
            return outcome.EXIT_INCONCLUSIVE
        return outcome.EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """The bisection record."""
        return {
            "schema": "perfsuite-bisect",
            "schema_version": 1,
            "package": self.package,
            "releases": self.releases,
            "focus": list(self.focus),
            "first_bad": self.first_bad,
            "last_good": self.last_good,
            "evidence_step": self.evidence,
            "range": list(self.range) if self.range else None,
            "skipped": self.skipped,
            "builds": self.builds,
            "steps": [s.to_dict() for s in self.steps],
            "seconds": round(self.seconds, 1),
            "incomplete": self.incomplete,
        }


@dataclass(frozen=True)
class BisectOptions:
    """What the user asked for."""

    package: str
    good: str
    bad: str
    with_requirements: tuple[str, ...]
    ab: ab_run.Options  # a and b are filled per step
    output_dir: Path = Path("reports/bisect")


def _spec(package: str, version: Version, extra: Sequence[str]) -> str:
    return " ".join([f"{package}=={version}", *extra])


def bisect(
    options: BisectOptions,
    lister: Lister = index_versions,
    run_ab: Callable[[ab_run.Options], Outcome] | None = None,
    say: Callable[[str], None] | None = None,
    resolve: Callable[[str, Path | None], stacks.Stack] = stacks.resolve,
) -> Search:
    """Find the first bad release; every step's A/B record is kept.

    ``lister``, ``run_ab`` and ``resolve`` list the releases, run one A/B and build one
    environment (the index, :func:`perfsuite.ab.run.run`, :func:`perfsuite.ab.stacks.resolve`).
    SIGINT, SIGTERM and SIGHUP end the search: the step under way says it was interrupted,
    every process the search started is ended, and the record holds the steps so far.
    """
    with processes.interruptible():
        return _bisect(
            options, lister, run_ab, say or functools.partial(print, flush=True), resolve
        )


def _bisect(
    options: BisectOptions,
    lister: Lister,
    run_ab: Callable[[ab_run.Options], Outcome] | None,
    say: Callable[[str], None],
    resolve: Callable[[str, Path | None], stacks.Stack],
) -> Search:
    try:
        Requirement(options.package)
    except InvalidRequirement:
        raise PerfsuiteError(f"bisect: {options.package!r} is not a package name") from None
    releases = releases_between(options.package, options.good, options.bad, lister)
    run_id, _ = new_run_id()
    workdir = (options.output_dir / run_id).absolute()  # as perfsuite ab's (see there)
    workdir.mkdir(parents=True, exist_ok=True)
    bisection = _Bisection(options, releases, workdir, run_ab, say, resolve)
    search = bisection.search
    say(
        f"bisect {options.package}: {len(releases)} releases from {releases[0]} to "
        f"{releases[-1]}: {', '.join(search.releases)}"
    )
    started = time.monotonic()
    try:
        bisection.find()
    except KeyboardInterrupt:
        if not search.incomplete:  # between steps: building the next one's environments
            search.incomplete = (
                f"interrupted before step {len(search.steps) + 1} (building its environments)"
            )
    finally:
        search.seconds = time.monotonic() - started
        bisection.save()
        write_text_atomic(workdir / "bisect.html", page(search))
    return search


@dataclass
class _Bisection:
    """One search under way: the releases' environments, its steps, the record after each."""

    options: BisectOptions
    releases: list[Version]
    workdir: Path
    run_ab: Callable[[ab_run.Options], Outcome] | None
    say: Callable[[str], None]
    resolve: Callable[[str, Path | None], stacks.Stack]
    search: Search = field(init=False)
    built: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.search = Search(self.options.package, [str(v) for v in self.releases])

    def save(self) -> None:
        """Write the record of the search so far."""
        record = self.workdir / "bisect.json"
        write_text_atomic(record, json.dumps(self.search.to_dict(), indent=1) + "\n")

    def find(self) -> None:
        """Step 1 over the whole selection, then the binary search on the checks it regressed."""
        releases, search = self.releases, self.search
        first = self.step(releases[0], releases[-1], None)
        if first is None or first.skipped:
            raise PerfsuiteError(
                f"bisect: the good or bad end cannot be judged: "
                f"{search.skipped.get(str(releases[0])) or search.skipped.get(str(releases[-1]))}"
            )
        if not first.verdicts:
            raise PerfsuiteError(
                f"bisect: step 1 compared no check ({releases[0]} against {releases[-1]}); "
                f"see {first.record}"
            )
        search.focus = first.regressed
        if search.focus:
            self.narrow()

    def narrow(self) -> None:
        """Halve the releases between the last good and the first bad until they are neighbours."""
        releases, search = self.releases, self.search
        lo, hi = 0, len(releases) - 1
        search.evidence = 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            verdict = None
            # A skipped release: try its neighbours inside the interval, nearest first.
            for cand in sorted(range(lo + 1, hi), key=lambda i: (abs(i - mid), i)):
                verdict = self.step(releases[lo], releases[cand], search.focus)
                if verdict is not None and not verdict.skipped:
                    mid = cand
                    break
                verdict = None
            if verdict is None:
                # Every release in between was skipped: the first bad one lies in (lo, hi].
                search.range = (str(releases[lo]), str(releases[hi]))
                break
            if verdict.regressed:
                hi, search.evidence = mid, len(search.steps) - 1
            else:
                lo = mid
        if not search.range:
            search.first_bad = str(releases[hi])
            search.last_good = str(releases[lo])

    def environment(self, version: Version) -> str | None:
        """The release's stack spec, or None (skipped, with the reason kept)."""
        options, search = self.options, self.search
        spec = _spec(options.package, version, options.with_requirements)
        if str(version) in search.skipped:
            return None
        if str(version) not in self.built:
            try:
                stack = self.resolve(spec, options.ab.cache)
            except PerfsuiteError as exc:
                search.skipped[str(version)] = str(exc)
                self.say(f"skip {version}: {exc}")
                return None
            self.built.add(str(version))
            search.builds.append(
                {
                    "release": str(version),
                    "seconds": round(stack.built_s, 1),
                    "cached": stack.cached,
                }
            )
            how = "cached" if stack.cached else f"built in {stack.built_s:.0f} s"
            self.say(f"environment {options.package}=={version}: {how}")
        return spec

    def step(self, a: Version, b: Version, selection: tuple[str, ...] | None) -> Step | None:
        """One A/B of B against A on ``selection`` (None: all), kept; None when one is skipped."""
        spec_a, spec_b = self.environment(a), self.environment(b)
        if spec_a is None or spec_b is None:
            return None
        number = len(self.search.steps) + 1
        self.say(f"step {number}: {a} (A) against {b} (B)")
        opts = dataclasses.replace(
            self.options.ab,
            a=spec_a,
            b=spec_b,
            selection=selection,
            output_dir=self.workdir,
            run_id=f"step-{number:02d}-{a}-vs-{b}",
        )
        result = (self.run_ab or ab_run.run)(opts)
        if result.session.incomplete:
            self.interrupted(a, b, number, result)
        done = self.judged(a, b, selection, result)
        self.search.steps.append(done)
        regressed = done.regressed
        self.say(
            f"  {b} against {a}: "
            + (
                f"{len(regressed)} regressed: {', '.join(regressed[:4])}"
                if regressed
                else "none regressed"
            )
        )
        self.save()
        return done

    def interrupted(self, a: Version, b: Version, number: int, result: Outcome) -> NoReturn:
        """Keep a step interrupted inside its A/B, and end the search."""
        # Its verdicts are unfinished, so it neither regressed nor cleared anything, and no
        # release is skipped for it.
        search = self.search
        search.steps.append(
            Step(
                str(a),
                str(b),
                (),
                tuple(sorted(c.id for c in result.checks)),
                {c.id: (c.verdict, c.ratio) for c in result.checks},
                str(result.record),
                result.session.seconds,
                len(result.session.order),
                interrupted=True,
            )
        )
        search.incomplete = (
            f"interrupted inside step {number} ({b} against {a}: {result.session.incomplete})"
        )
        self.say(f"  step {number} interrupted: {result.session.incomplete}")
        raise KeyboardInterrupt

    def judged(
        self, a: Version, b: Version, selection: tuple[str, ...] | None, result: Outcome
    ) -> Step:
        """A finished step: its verdicts, and B skipped where it does not run or decide."""
        search = self.search
        failed_b = [r for r in result.session.runs if r.side == "B" and r.failed]
        ran_b = [r for r in result.session.runs if r.side == "B"]
        if ran_b and len(failed_b) == len(ran_b):
            why = f"{b} does not run: {failed_b[-1].failed}; {failed_b[-1].output_tail[-300:]}"
            search.skipped[str(b)] = why
            self.say(f"skip {b}: {why}")
        verdicts = {c.id: (c.verdict, c.ratio) for c in result.checks}
        regressed = tuple(sorted(c.id for c in result.checks if c.verdict == "regressed"))
        undecided = tuple(sorted(c.id for c in result.checks if c.verdict == "unknown"))
        if selection is not None and not regressed and str(b) not in search.skipped:
            # Past step 1, a release whose focus checks are not all decided is neither good
            # nor bad: counting it good could name the wrong release.
            missing = [c for c in selection if verdicts.get(c, ("unknown", None))[0] == "unknown"]
            if missing:
                why = f"{len(missing)} focus checks undecided within the budget"
                search.skipped[str(b)] = why
                self.say(f"skip {b}: {why}")
        return Step(
            str(a),
            str(b),
            regressed,
            undecided,
            verdicts,
            str(result.record),
            result.session.seconds,
            len(result.session.order),
            search.skipped.get(str(b), ""),
        )


def summary_lines(search: Search) -> list[str]:
    """The answer: for each regressed check, the first bad release and its evidence."""
    lines = []
    builds = [b for b in search.builds if not b["cached"]]
    lines.append(
        f"{len(search.steps)} A/B steps in {search.seconds:.0f} s; environments: "
        f"{len(builds)} built ({sum(b['seconds'] for b in builds):.0f} s), "
        f"{len(search.builds) - len(builds)} cached"
    )
    for release, why in search.skipped.items():
        lines.append(f"skipped {release}: {why}")
    if search.incomplete:
        lines.append(f"INCOMPLETE: {search.incomplete}")
    if not search.steps:
        return lines
    if search.steps[0].interrupted:
        lines.append("step 1 was interrupted: nothing is decided yet")
        return lines
    if not search.focus:
        first = search.steps[0]
        undecided = (
            f"; {len(first.undecided)} of {len(first.verdicts)} checks undecided within the "
            "budget (a larger --budget or --max-rounds may decide them)"
            if first.undecided
            else ""
        )
        lines.append(
            f"nothing regressed from {search.releases[0]} to {search.releases[-1]}{undecided} "
            f"(step 1: {first.record})"
        )
        return lines
    if search.range:
        lines.append(
            f"the first bad release lies after {search.range[0]}, up to {search.range[1]}: "
            "every release in between was skipped"
        )
        return lines
    if not search.first_bad:
        lines.append("no first bad release found")
        return lines
    ev = search.steps[search.evidence or 0]
    for check in search.focus:
        verdict, ratio = ev.verdicts.get(check, ("not measured", None))
        change = f"{ratio - 1:+.1%}" if ratio else "-"
        lines.append(
            f"{check}: first bad {search.package} {search.first_bad} (last good "
            f"{search.last_good}); evidence: {ev.b} against {ev.a} {change}, {verdict}"
        )
    return lines


def page(search: Search) -> str:
    """The HTML page of the search: every step, each pair's ratio and verdict."""
    import html

    esc = html.escape
    rows = []
    for i, s in enumerate(search.steps, 1):
        for check, (verdict, ratio) in sorted(s.verdicts.items()):
            change = f"{ratio - 1:+.1%}" if ratio else "-"
            rows.append(
                f"<tr><td>{i}</td><td>{esc(s.a)}</td><td>{esc(s.b)}</td><td>{esc(check)}</td>"
                f"<td>{change}</td><td>{esc(verdict)}</td><td>{s.rounds}</td></tr>"
            )
    answer = "<br>".join(esc(line) for line in summary_lines(search))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>perfsuite bisect {esc(search.package)}</title><style>
body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em}}</style></head><body>
<h1>perfsuite bisect {esc(search.package)}:
{esc(search.releases[0])} .. {esc(search.releases[-1])}</h1>
<p>{answer}</p>
<table><tr><th>step</th><th>A</th><th>B</th><th>check</th><th>B/A</th><th>verdict</th>
<th>rounds</th></tr>{"".join(rows)}</table></body></html>
"""
