"""Argument types, the shared options and the help layout of every ``perfsuite`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from perfsuite.errors import PerfsuiteError
from perfsuite.judge import outcome, stats
from perfsuite.model import RunRecord
from perfsuite.model.baseline import MAX_WINDOW, MIN_WINDOW
from perfsuite.settings import duration
from perfsuite.store.files import same_file


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


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}")
    return value


def duration_arg(text: str) -> float:
    try:
        return duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration of 0 or more (30m, 1800s, 1h), got {text!r}"
        ) from None


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def window_arg(text: str) -> int:
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


def path_arg(text: str) -> str:
    """A path argument: an empty one would mean the current directory, so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"empty path {text!r}: name a file or directory")
    return text


def text_arg(text: str) -> str:
    """A ``-k`` text: an empty one would match every check, so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"empty value {text!r}: name text the check ids hold, or leave -k out for every check"
        )
    return text


def outcomes_fail_on(text: str) -> frozenset[str]:
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


def add_family_options(
    parser: argparse.ArgumentParser,
    alpha_help: str,
    fail_on: Callable[[str], frozenset[str]],
    names: str,
) -> None:
    """--alpha, --correction and --fail-on: how a command judges a family and what fails it."""
    parser.add_argument(
        "--alpha",
        type=fraction,
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


def verdicts_fail_on(text: str) -> frozenset[str]:
    names = frozenset(t.strip() for t in text.split(",") if t.strip())
    bad = names - {"regressed", "improved", "unknown"}
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use regressed, improved or unknown, comma-separated"
        )
    return names


def only_checks(parser: argparse.ArgumentParser) -> None:
    """The ``-k`` of ``history`` and ``baseline accept``: checks whose id holds a text."""
    parser.add_argument(
        "-k",
        type=text_arg,
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
