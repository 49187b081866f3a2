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
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from perfsuite import __version__, outcome, records, stats
from perfsuite import history as hist
from perfsuite.baseline import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    MIN_WINDOW,
    BaselineStore,
    safe_profile_name,
)
from perfsuite.compare import (
    comparable,
    compare_runs,
    compared_record,
    environment_diff,
    sessions,
)
from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.detect import resolve
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry, did_you_mean
from perfsuite.model import RunRecord
from perfsuite.report import history_text
from perfsuite.report.explain import CORRECTION_NAMES, explained_record, young_baseline_note
from perfsuite.report.terminal import format_table, printable, short_id
from perfsuite.settings import duration
from perfsuite.storage import check_target, same_file, write_json_atomic, write_text_atomic


def _row(profile: HardwareProfile) -> tuple[str, str, str, str, str]:
    bw = profile.figure("memory.bandwidth_gbs")
    fp32 = profile.figure("compute.fp32_tflops")
    bw_text = f"{bw:.4g} GB/s" if bw else "-"
    fp32_text = f"{fp32:.4g} TFLOP/s" if fp32 else "-"
    return (profile.name, profile.kind, bw_text, fp32_text, profile.description)


def _profiles(args: argparse.Namespace) -> int:
    registry = ProfileRegistry([Path(d) for d in args.profile_dir])
    if args.action == "show":
        if not args.name:
            raise PerfsuiteError("perfsuite profiles show: name a profile, or 'auto' for this host")
        profile = resolve(args.name, registry)
        print(f"# {profile.origin}")
        print(profile.to_toml(), end="")
        return outcome.EXIT_OK
    rows = [("name", "kind", "bandwidth", "fp32", "description")]
    rows += [_row(profile) for profile in registry.load_all()]
    here = resolve("auto", registry)
    estimated = " (compute peaks estimated)" if here.estimated else ""
    rows.append(("auto", "", "", "", f"this machine: {here.name}{estimated}"))
    print("\n".join(format_table(rows)))
    return outcome.EXIT_OK


def _backends(args: argparse.Namespace) -> int:
    """Every backend ``--perf-backend`` accepts, whether it is installed, and how to install it."""
    from perfsuite import backends
    from perfsuite.collectives import LIBRARIES
    from perfsuite.options import installed

    def row(name: str, kind: str, module: str, hint: str) -> tuple[str, str, str, str]:
        here = installed(module)
        return (name, kind, "yes" if here else "no", "" if here else hint)

    rows = [("name", "kind", "installed", "to install")]
    rows += [
        row(name, "framework", b.module, f"pip install 'perfsuite[{b.extra}]'" if b.extra else "")
        for name, b in backends.registry().items()
    ]
    rows += [
        row(name, "collective (allreduce ranks)", module, hint)
        for name, (module, hint) in LIBRARIES.items()
    ]
    print("\n".join(format_table(rows)))
    return outcome.EXIT_OK


def _signed(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def distinct_inputs(paths: Sequence[str], loaded: Sequence[RunRecord]) -> None:
    """Refuse a record given twice: it is one run, and counting it twice fakes evidence."""
    seen: dict[str, str] = {}
    for path, record in zip(paths, loaded, strict=True):
        for key in (f"file {Path(path).resolve()}", f"run {record.run_id}"):
            if key in seen:
                raise PerfsuiteError(
                    f"{path}: the same {key.split()[0]} as {seen[key]} ({key.split(' ', 1)[1]}); "
                    "each run record counts once: give each run once"
                )
            seen[key] = path


def not_an_input(output: str | Path, inputs: Sequence[str | Path], what: str) -> Path:
    """An output path that names none of the inputs (it would overwrite a run record)."""
    out = Path(output)
    for path in inputs:
        if out.resolve() == Path(path).resolve() or same_file(out, Path(path)):
            raise PerfsuiteError(f"{what} {output}: that is an input of this command; name another")
    return out


def a_page(output: str | Path, what: str) -> Path:
    """An HTML page's path, never a ``.json`` one: history and compare read those as records."""
    if Path(output).suffix.lower() == ".json":
        raise PerfsuiteError(
            f"{what} {output}: a page is HTML, not a run record (.json); a .json file where "
            "records are kept would be read as a corrupt record: name a .html file"
        )
    return Path(output)


def _compared_runs(args: argparse.Namespace) -> list[RunRecord]:
    """The runs compared: record files, or with --store the runs of those ids in the store."""
    if args.store is None:
        return [records.load_record(Path(p)) for p in args.runs]
    from perfsuite.store import load_runs

    return load_runs(Path(args.store), run_ids=args.runs)


def _store_import(args: argparse.Namespace) -> int:
    from perfsuite.store import Store, import_dir

    done = import_dir(Store.open(Path(args.store), create=True), Path(args.dir))
    for line in done.unreadable:
        print(f"perfsuite: skipped: {line}", file=sys.stderr)
    print(
        f"{args.store}: {done.added} run(s) added, {done.already} already there"
        + (f", {len(done.unreadable)} file(s) unreadable (above)" if done.unreadable else "")
    )
    return outcome.EXIT_OK


def _store_info(args: argparse.Namespace) -> int:
    from perfsuite.store import SCHEMA_VERSION, Store

    info = Store.open(Path(args.store)).info()
    print(
        f"{args.store}: {info.runs} run(s), {info.results} result(s) in {info.shards} "
        f"shard(s), {info.bytes / 1e6:.1f} MB; schema version "
        f"{', '.join(map(str, info.versions)) or SCHEMA_VERSION}"
    )
    for profile, runs in info.profiles:
        print(f"  {profile}: {runs} run(s)")
    return outcome.EXIT_OK


def _store_compact(args: argparse.Namespace) -> int:
    from perfsuite.store import Store

    merged, name = Store.open(Path(args.store)).compact()
    print(f"{args.store}: merged {merged} shard(s) into {name}" if name else
          f"{args.store}: nothing to merge")  # fmt: skip
    return outcome.EXIT_OK


def _store_parser(sub: Any) -> None:
    store = sub.add_parser(
        "store",
        help="the results store: import run records, show what it holds, compact it",
        description=(
            "The results store holds every run's readings, environment and verdicts; each "
            "pytest session appends its run to REPORT_DIR/_store. See docs/store.md. "
            f"Exit status: {outcome.EXIT_OK} done, {outcome.EXIT_USAGE} usage error."
        ),
    )
    store_sub = store.add_subparsers(dest="store_command", required=True)
    where = {
        "type": _path,
        "default": "reports/_store",
        "metavar": "PATH",
        "help": "the store's folder (default: reports/_store)",
    }
    imp = store_sub.add_parser(
        "import",
        help="load the run records under DIR into the store",
        description="Load every run record under DIR (at any depth) that the store lacks: "
        "importing twice adds nothing; a file that is no readable run record is named in one "
        "line and skipped.",
    )
    imp.add_argument("dir", metavar="DIR", type=_path, help="a folder of run records")
    imp.add_argument("--store", **where)
    imp.set_defaults(func=_store_import)
    info = store_sub.add_parser("info", help="what the store holds")
    info.add_argument("--store", **where)
    info.set_defaults(func=_store_info)
    compact = store_sub.add_parser(
        "compact",
        help="merge the store's shards into one (safe while writers append)",
        description="Merge every shard into one, written under a temporary name and renamed "
        "into place before the shards it replaces are removed; shards of an earlier schema "
        "version are rewritten in this version's layout.",
    )
    compact.add_argument("--store", **where)
    compact.set_defaults(func=_store_compact)


def _compare(args: argparse.Namespace) -> int:
    if args.html is not None:
        check_target(a_page(not_an_input(args.html, args.runs, "--html"), "--html"))
    loaded = _compared_runs(args)
    distinct_inputs(args.runs, loaded)
    *before, b = sessions(loaded, args.passes)
    if args.passes > 1:
        print(
            f"sessions of {args.passes} passes: each check kept from its fastest pass, "
            "before and after alike"
        )
        for session in [*before, b]:
            kept = Counter(r.context["passes"]["kept"] for r in session.results)
            print(f"  {session.run_id}: " + ", ".join(f"{n} from {k}" for k, n in kept.items()))
    rows, only_a, only_b = compare_runs(
        before,
        b,
        tolerance=args.tolerance,
        alpha=args.alpha,
        correction=args.correction,
        window_s=args.baseline_window,
    )
    for a in before:
        print(f"A: {a.run_id} ({a.created})")
    print(f"B: {b.run_id} ({b.created})")
    profile = b.hardware_profile.get("name")
    print(
        f"profile: {profile}; {len(before)} {'session(s)' if args.passes > 1 else 'run(s)'} "
        "before; "
        f"{CORRECTION_NAMES[args.correction]} over {len(rows)} checks, alpha {args.alpha}"
    )
    judged = explained_record(compared_record(b, rows, args.tolerance, args.correction))
    reasons = {r.id: r.baseline.reason for r in judged.results}
    by_id = {row.id: row for row in rows}
    rows = [by_id[r.id] for r in outcome.worst_first(judged.results) if r.id in by_id]
    table = [("check", "A", "B", "ratio B/A", "95% CI", "p", "verdict")]
    for r in rows:
        c = r.comparison
        table.append(
            (
                short_id(r.id),
                f"{r.a_median:.4g} {r.unit}",
                f"{r.b_median:.4g} {r.unit}",
                f"{c.ratio:.3f}{'*' if r.machine else ''}",
                f"[{c.ci_low:.3f}, {c.ci_high:.3f}]",
                f"{c.p_value:.2g}",
                r.verdict,
            )
        )
    print("\n".join(format_table(table)))
    moves = [r.machine["ratio"] for r in rows if r.machine]
    if moves:
        print(
            f"* {len(moves)} check(s) judged per unit of machine speed: the framework-free "
            f"probe moved {_signed(min(moves))} to {_signed(max(moves))} from A to B"
        )
    for r in rows:
        if r.verdict != "ok":
            print(f"{r.verdict}: {short_id(r.id)}: {printable(reasons[r.id])}")
    young = young_baseline_note(judged.results)
    if young:
        words = young.replace("Add runs with --perf-save-baseline", "Give more runs before")
        print(words.replace("--perf-baseline-window", "--baseline-window"))
    for node_id in only_a:
        print(f"only in A: {node_id}")
    for node_id in only_b:
        print(f"only in B: {node_id}")
    diff = environment_diff(before[-1].environment, b.environment)
    print("\nenvironment changes (A -> B):" if diff else "\nenvironment: no changes")
    for key, old, new in diff:
        print(f"  {key}: {old!r} -> {new!r}")
    compared = [r for r in judged.results if r.id in {row.id for row in rows}]
    if args.html is not None:
        from dataclasses import replace

        from perfsuite.report.html import render

        # The report shows what compare judged, under compare's --fail-on: its banner and
        # counts are the ones printed below, and its outcome the exit status.
        shown = replace(
            judged,
            results=tuple(compared),
            settings={**judged.settings, "fail_on": sorted(args.fail_on)},
        )
        html = render(
            shown,
            baseline=before[-1],
            title=f"perfsuite A/B: {before[-1].run_id} -> {b.run_id}",
            compared_with=[a.run_id for a in before],
        )
        write_text_atomic(Path(args.html), html)
        print(f"HTML report: {args.html}")
    counts = outcome.counts(compared)
    print(
        "\n"
        + (
            ", ".join(f"{counts[k]} {k}" for k in outcome.ORDER if counts.get(k))
            or "nothing compared: "
            + (
                f"B ({b.run_id}) holds no results"
                if not b.results
                else "no check was measured in both A and B, in the same unit"
            )
        )
    )
    if b.incomplete:
        print(f"B ({b.run_id}) is incomplete: {printable(b.incomplete)}")
    for crash in b.crashed:
        message = printable(crash.message)
        print(f"crashed in B: {short_id(crash.id)} ({crash.phase}): {message}")
    verdict = outcome.record_verdict(judged, args.fail_on, results=compared)
    worst = verdict.named()
    print(
        f"\ncompare: {verdict.headline}"
        + (f": {worst}" if worst else "")
        + f" (exit {verdict.exit_code})"
    )
    return verdict.exit_code


def _readable_history(report_dir: Path, profile: str) -> list[RunRecord]:
    """A profile's run records; each unreadable one is named on stderr and skipped."""
    problems: list[str] = []
    runs = records.history(report_dir, profile, skip_unreadable=True, problems=problems)
    for problem in problems:
        print(f"perfsuite: skipped a run record: {problem}", file=sys.stderr)
    return runs


def _report(args: argparse.Namespace) -> int:
    from perfsuite.report.html import render

    inputs = [args.run, *([args.baseline] if args.baseline else [])]
    out = not_an_input(args.output or Path(args.run).with_suffix(".html"), inputs, "-o")
    a_page(out, "-o")
    check_target(out)
    record = records.load_record(Path(args.run))
    baseline = records.load_record(Path(args.baseline)) if args.baseline else None
    if baseline is not None:  # judged against it, as compare would be: the same checks
        distinct_inputs([args.baseline, args.run], [baseline, record])
        comparable([baseline], record)
    history = []
    profile = str(record.hardware_profile.get("name"))
    if args.report_dir and (Path(args.report_dir) / profile).is_dir():
        history = _readable_history(Path(args.report_dir), profile)
    write_text_atomic(out, render(record, baseline=baseline, history=history))
    print(f"HTML report: {out}")
    return outcome.EXIT_OK


def _history_profiles(source: Path, is_store: bool) -> list[str]:
    """The profiles with runs: a store's, or the folders of a report directory."""
    if not is_store:
        return records.profiles(source)
    from perfsuite.store import Store

    return sorted(name for name, _ in Store.open(source).info().profiles)


def _history(args: argparse.Namespace) -> int:
    import json

    report_dir = Path(args.store or args.report_dir)
    known = _history_profiles(report_dir, args.store is not None)
    if args.profile is None:
        if len(known) == 1:
            args.profile = known[0]
        else:
            here = resolve("auto", ProfileRegistry()).name
            if here not in known:
                raise PerfsuiteError(
                    f"{report_dir}: no run records of this machine's profile ({here}); name "
                    f"one with --profile (run records exist for: {', '.join(known) or 'none'})"
                )
            args.profile = here
    folded = {name.lower(): name for name in known}
    if args.profile.lower() not in folded:
        raise PerfsuiteError(
            f"{report_dir}: no run records of profile {args.profile!r}"
            f"{did_you_mean(args.profile, known)} (run records "
            f"exist for: {', '.join(known) or 'none'})"
        )
    args.profile = folded[args.profile.lower()]
    if args.html is not None and Path(args.html).exists() and not Path(args.html).is_dir():
        raise PerfsuiteError(f"--html {args.html}: not a directory; name a directory for the site")
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
        from perfsuite.report.history_page import write_site

        current = (args.profile, shown, len(runs), trends)
        if args.store is not None:
            from perfsuite.store import load_runs

            def load(name: str) -> list[RunRecord]:
                return load_runs(report_dir, name)

            write_site(Path(args.html), report_dir, current, settings, load, known)
        else:
            write_site(Path(args.html), report_dir, current, settings)
    if args.json:
        doc = hist.to_json(args.profile, shown, trends, settings, verdict, code, problems)
        print(json.dumps(doc, indent=1))
        return code
    for line in history_text.text(args.profile, shown, len(runs), trends, failed, code):
        print(line)
    if args.html is not None:
        print(f"history site: {args.html}")
    return code


def _accept(args: argparse.Namespace) -> int:
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


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}")
    return value


def _duration(text: str) -> float:
    try:
        return duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration of 0 or more (30m, 1800s, 1h), got {text!r}"
        ) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _window(text: str) -> int:
    """``baseline accept --runs``: the runs a baseline keeps per check, within its range."""
    try:
        value = int(text) if len(text.strip()) <= 12 else 0
    except ValueError:
        value = 0
    if not MIN_WINDOW <= value <= MAX_WINDOW:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from {MIN_WINDOW} to {MAX_WINDOW}, got {text[:40]!r}"
        )
    return value


def _path(text: str) -> str:
    """A path argument: an empty one would mean the current directory, so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty path {text!r}: name a file or directory")
    return text


def _text(text: str) -> str:
    """A ``-k`` text: an empty one would match every check, so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"empty value {text!r}: name text the check ids hold, or leave -k out for every check"
        )
    return text


def _fail_on(text: str) -> frozenset[str]:
    try:
        return outcome.parse_fail_on(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


EXIT_STATUS = """\
exit status (one table for every perfsuite command and for pytest runs with the plugin):
  0  passed: nothing failed and nothing was left undecided (a first run: measured)
  1  failed: a regression, a missed floor, a crashed check, B broken where A ran,
     a node to drain, a baseline not saved
  2  interrupted: Ctrl-C, SIGTERM or SIGHUP; what was decided is written first
  3  internal error: a defect in perfsuite (the traceback is printed)
  4  usage error: a bad option, argument or input file
  5  no test collected (pytest's own; perfsuite's commands never use it)
  6  undecided: nothing failed, but a verdict asked for was not decided (noisy checks,
     an undecided A/B, a node to rerun, an empty comparison)
"""

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
    )


def _ab(args: argparse.Namespace) -> int:
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


def _ab_parser(sub: Any) -> None:
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
    ab.set_defaults(func=_ab)


def _bisect(args: argparse.Namespace) -> int:
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


def _bisect_parser(sub: Any) -> None:
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
    bis.set_defaults(func=_bisect)


def _round_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of the rounds, shared by ab and bisect (``command``), defaults shown."""
    from perfsuite.ab import run as ab_run
    from perfsuite.ab.rounds import INTERLEAVES

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
        type=_positive,
        default=3,
        metavar="N",
        help="rounds before judging, at least 2 (default: 3)",
    )
    p.add_argument(
        "--max-rounds",
        type=_positive,
        default=20,
        metavar="N",
        help="round cap: the rounds stop here even with budget left (default: 20)",
    )
    p.add_argument(
        "--tolerance",
        type=_fraction,
        default=None,
        help="smallest change that counts, a fraction such as 0.05 (default: each check's own)",
    )
    _add_family_options(p, "significance", _ab_fail_on, "regressed, improved, unknown")
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
        type=_positive,
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


def _add_family_options(
    parser: argparse.ArgumentParser,
    alpha_help: str,
    fail_on: Callable[[str], frozenset[str]],
    names: str,
) -> None:
    """--alpha, --correction and --fail-on: how a command judges a family and what fails it."""
    parser.add_argument(
        "--alpha",
        type=_fraction,
        default=stats.ALPHA,
        help=f"{alpha_help}, between 0 and 1 (default: {stats.ALPHA})",
    )
    parser.add_argument(
        "--correction",
        choices=stats.CORRECTIONS,
        default=stats.DEFAULT_CORRECTION,
        help="fdr (Benjamini-Hochberg) or holm (family-wise error) (default: "
        f"{stats.DEFAULT_CORRECTION})",
    )
    parser.add_argument(
        "--fail-on",
        type=fail_on,
        default=frozenset({"regressed"}),
        metavar="VERDICTS",
        help=f"what makes the exit status {outcome.EXIT_REGRESSED}: {names}, comma-separated "
        "(default: regressed)",
    )


def _ab_fail_on(text: str) -> frozenset[str]:
    names = frozenset(t.strip() for t in text.split(",") if t.strip())
    bad = names - {"regressed", "improved", "unknown"}
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use regressed, improved or unknown, comma-separated"
        )
    return names


def _fleet_path(what: str, text: str) -> Path:
    """A path option of a fleet command: not empty (the cwd, by accident), no control codes."""
    from perfsuite.fleet.labels import check_text

    return check_text(what, text)


def _fleet_report(args: argparse.Namespace) -> int:
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
    from perfsuite.report import fleet as report
    from perfsuite.report import fleet_page

    rule = judge.Rule(alpha=args.alpha, tolerance=args.tolerance, min_spread=args.min_spread)
    fleet = assess(directory, rule, confirm=confirm)
    try:
        write_json_atomic(drain, report.drain_list(fleet))
        if html is not None:
            write_text_atomic(html, fleet_page.page(fleet))
    except OSError as exc:
        raise PerfsuiteError(f"perfsuite fleet report: cannot write: {exc}") from None
    for line in report.terminal_lines(fleet, str(drain), "" if html is None else str(html)):
        print(line)
    return fleet.exit_status


def _fleet_run(args: argparse.Namespace) -> int:
    from perfsuite import processes
    from perfsuite.fleet import run as fleet_run

    try:
        with processes.interruptible():
            if args.nodelist is not None and not args.nodelist:
                raise fleet_run.FleetError("--nodelist '': name the hosts, or leave it out")
            options = fleet_run.Options(
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
    """An argparse type: seconds above 0, finite, at most a week (fleet.run.MAX_TIMEOUT_S)."""

    def parse(text: str) -> float:
        from perfsuite.fleet.labels import FleetError
        from perfsuite.fleet.run import parse_seconds

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


def _fleet_parser(sub: Any) -> None:
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
        "--nodes", type=_positive, default=None, help="nodes (default: the allocation's)"
    )
    run.add_argument(
        "--tasks-per-node",
        type=_positive,
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
    run.set_defaults(func=_fleet_run)

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
        type=_fraction,
        default=0.01,
        help="false alarms over the whole fleet, nodes x checks, per profile (default 0.01)",
    )
    rep.add_argument(
        "--tolerance",
        type=_fraction,
        default=0.10,
        help="the least shortfall from the fleet median that counts (default 0.10)",
    )
    rep.add_argument(
        "--min-spread",
        type=_fraction,
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
    rep.set_defaults(func=_fleet_report)


def only_checks(parser: argparse.ArgumentParser) -> None:
    """The ``-k`` of ``history`` and ``baseline accept``: checks whose id holds a text."""
    parser.add_argument(
        "-k",
        type=_text,
        action="append",
        default=[],
        metavar="TEXT",
        help="only checks whose id contains TEXT; repeat for more (default: every check)",
    )


class Parser(argparse.ArgumentParser):
    """argparse's parser with the table's usage status (pytest's 4, not argparse's 2)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the error in one line; exit with the usage status."""
        self.print_usage(sys.stderr)
        self.exit(outcome.EXIT_USAGE, f"{self.prog}: error: {message}\n")


class DefaultsAndRawEpilog(
    argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter
):
    """Defaults shown, and the description and epilog kept as written (tables)."""


def raw_epilog(formatter: Any) -> Any:
    """``formatter``, changed where needed to keep the epilog's lines as written."""
    if issubclass(formatter, argparse.RawDescriptionHelpFormatter):
        return formatter
    if issubclass(formatter, argparse.ArgumentDefaultsHelpFormatter):
        return DefaultsAndRawEpilog
    return argparse.RawDescriptionHelpFormatter


def with_exit_table(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every command's ``--help`` ends with the one exit-status table."""
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        current.formatter_class = raw_epilog(current.formatter_class)
        current.epilog = "\n".join(x for x in (current.epilog, EXIT_STATUS) if x)
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return parser


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
        type=_path,
        action="append",
        default=[],
        metavar="DIR",
        help="an extra directory of profile TOML files; repeat for more (default: none)",
    )
    profiles.set_defaults(func=_profiles)

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
    backends.set_defaults(func=_backends)

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
        "runs", metavar="RUN.json", type=_path, nargs="+", help="A run(s) ..., then B"
    )
    comp.add_argument(
        "--store",
        type=_path,
        default=None,
        metavar="PATH",
        help="read the runs from this results store: give run ids instead of files "
        "(default: none, the runs are record files)",
    )
    comp.add_argument(
        "--tolerance",
        type=_fraction,
        default=None,
        help="override the tolerance B was judged with (a fraction between 0 and 1; "
        "default: each check's own, as B was judged)",
    )
    _add_family_options(comp, "significance level", _fail_on, ", ".join(outcome.CHOOSABLE))
    comp.add_argument(
        "--passes",
        type=_positive,
        default=1,
        metavar="N",
        help="every N consecutive records are passes of one session (the last N are B): each "
        "check is judged by its fastest pass, before and after alike (default 1)",
    )
    comp.add_argument(
        "--baseline-window",
        type=_duration,
        default=stats.BACK_TO_BACK_S,
        metavar="DURATION",
        help="A runs created within this time of each other (30m, 1800s, 1h) count as one "
        f"session; with runs from fewer than {stats.MIN_RUNS} sessions A is judged with a "
        "cautious run-to-run spread; 0 counts each run as its own (default: 30m)",
    )
    comp.add_argument(
        "--html",
        type=_path,
        metavar="FILE",
        help="also write the A/B view as an HTML report to FILE (default: none)",
    )
    comp.set_defaults(func=_compare)

    _ab_parser(sub)
    _bisect_parser(sub)
    _fleet_parser(sub)

    rep = sub.add_parser(
        "report",
        help="render a run record as a self-contained HTML report",
        description=(
            "Render one run record as a self-contained HTML page: each check's verdicts, "
            "samples and explanation, with sparklines from the profile's earlier runs under "
            "--report-dir, and, with --baseline, another run of the same profile as ghosts and "
            f"an environment diff. Exit status: {outcome.EXIT_OK} written, "
            f"{outcome.EXIT_USAGE} usage error (the table below)."
        ),
    )
    rep.add_argument("run", metavar="RUN.json", type=_path, help="the run record to render")
    rep.add_argument(
        "--baseline",
        type=_path,
        metavar="RUN.json",
        help="another run of the same profile: ghosts and environment diff (default: none)",
    )
    rep.add_argument(
        "--report-dir",
        type=_path,
        default="reports",
        metavar="DIR",
        help="the run records whose history draws the sparklines (default: reports)",
    )
    rep.add_argument(
        "-o",
        "--output",
        type=_path,
        metavar="FILE",
        help="the page to write (default: RUN.html beside RUN.json)",
    )
    rep.set_defaults(func=_report)

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
        type=_path,
        default="reports",
        metavar="DIR",
        help="where the run records are (default: reports)",
    )
    histp.add_argument(
        "--store",
        type=_path,
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
        type=_fraction,
        metavar="FRACTION",
        default=hist.DEFAULT_MIN_EFFECT,
        help="smallest level change reported as a change point, a fraction between 0 and 1 "
        f"(default {hist.DEFAULT_MIN_EFFECT})",
    )
    _add_family_options(
        histp,
        "significance over the profile's checks",
        _ab_fail_on,
        "regressed, improved, unknown (too few runs to judge)",
    )
    histp.add_argument(
        "--last",
        type=_positive,
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
        type=_path,
        metavar="DIR",
        help="also write the history site to DIR: an index and one self-contained page per "
        "profile under --report-dir (default: none)",
    )
    histp.set_defaults(func=_history)
    _store_parser(sub)

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
    accept.add_argument("run", metavar="RUN.json", type=_path, help="the run record to accept")
    only_checks(accept)
    accept.add_argument(
        "--baseline-dir",
        type=_path,
        default="baselines",
        metavar="DIR",
        help="where baselines are kept, one folder per profile (default: baselines)",
    )
    accept.add_argument(
        "--runs",
        type=_window,
        default=None,
        metavar="K",
        help=f"accepted runs kept per check, {MIN_WINDOW} to {MAX_WINDOW} (default: the "
        f"window the baseline was written with, {DEFAULT_WINDOW} for a new one)",
    )
    accept.set_defaults(func=_accept)
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
