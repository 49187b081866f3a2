"""What ``perfsuite fleet run`` is asked: its options, checked, and the manifest that keeps them.

Everything is checked before anything is created (:func:`check_options`): a usage error
leaves no ``DIR/nodes/`` behind.  What each fleet run was asked is kept in
``DIR/nodes/fleet-run.json`` (:data:`MANIFEST`), so that a report can print the exact command
that reruns its flagged nodes (:func:`read_manifest`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.fleet.aggregate import NODES_DIR
from perfsuite.fleet.labels import GRAMMAR, FleetError, check_text, is_label
from perfsuite.store.files import read_text_bounded

DEFAULT_TIMEOUT_S = 1800.0
# The longest --timeout and --launch-timeout taken: a week (a batch queue's longest wait).
MAX_TIMEOUT_S = 7 * 24 * 3600.0
# What a fleet run was asked, kept beside the tasks' statuses.
MANIFEST = "fleet-run.json"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Options:
    """What ``perfsuite fleet run`` was asked."""

    directory: Path
    pytest_args: tuple[str, ...]
    nodes: int | None = None
    tasks_per_node: int = 1
    hostfile: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    launch_timeout_s: float | None = None
    launcher_args: tuple[str, ...] = ()
    nodelist: tuple[str, ...] = ()  # only these hosts (short or full names); () for all

    def to_dict(self) -> dict[str, Any]:
        """What ``DIR/nodes/fleet-run.json`` keeps: enough to run the same on other nodes."""
        return {
            "schema_version": MANIFEST_VERSION,
            "pytest_args": list(self.pytest_args),
            "tasks_per_node": self.tasks_per_node,
            "hostfile": None if self.hostfile is None else str(self.hostfile.absolute()),
            "timeout_s": self.timeout_s,
            "launcher_args": list(self.launcher_args),
            "nodelist": list(self.nodelist),
        }


def read_manifest(directory: Path) -> Options | None:
    """What the fleet run in ``directory`` was asked; None when it kept no (readable) record."""
    try:
        text = read_text_bounded(directory / NODES_DIR / MANIFEST, "fleet run", 1 << 20)
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("schema_version") != MANIFEST_VERSION:
            return None
        hostfile = d.get("hostfile")
        options = Options(
            directory=directory,
            pytest_args=tuple(_texts(d["pytest_args"])),
            tasks_per_node=d["tasks_per_node"],
            hostfile=None if hostfile is None else Path(_texts([hostfile])[0]),
            timeout_s=d["timeout_s"],
            launcher_args=tuple(_texts(d.get("launcher_args", []))),
            nodelist=tuple(_texts(d.get("nodelist", []))),
        )
        check_options(options)
        return options
    except (StorageError, FleetError, ValueError, KeyError, TypeError, RecursionError):
        return None


def _texts(values: object) -> list[str]:
    """A list of printable texts, read from a file; ValueError otherwise."""
    if not isinstance(values, list) or not all(
        isinstance(v, str) and v.isprintable() for v in values
    ):
        raise ValueError("not a list of printable texts")
    return values


def check_options(options: Options) -> None:
    """Refuse, as a usage error, what ``fleet run`` must not be asked.

    An empty path (the current directory, by accident), a path or argument with a line break
    or other control character (it would reach the batch script and the terminal), a host
    name outside hostname grammar, a timeout that is not a finite number of seconds in
    (0, MAX_TIMEOUT_S].
    """
    check_text("--dir", str(options.directory), absolute=True)
    if options.hostfile is not None:
        check_text("--hostfile", str(options.hostfile), absolute=True)
    for what, args in (("--launcher-arg", options.launcher_args), ("pytest", options.pytest_args)):
        bad = [a for a in args if not isinstance(a, str) or not a.isprintable()]
        if bad:
            raise FleetError(
                f"{what} argument {bad[0]!r}: a line break or control character would reach "
                "the launcher's command line, the batch script and the terminal"
            )
    _check_count("--tasks-per-node", options.tasks_per_node)
    if options.nodes is not None:
        _check_count("--nodes", options.nodes)
    for name in options.nodelist:
        if not is_label(name):
            raise FleetError(f"--nodelist: {name!r} is not a host name: use {GRAMMAR}")
    _check_seconds("--timeout", options.timeout_s)
    if options.launch_timeout_s is not None:
        _check_seconds("--launch-timeout", options.launch_timeout_s)


def _check_count(what: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise FleetError(f"{what} {value!r}: expected a whole number from 1 to 1000000")


def _check_seconds(what: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIMEOUT_S
    ):
        raise FleetError(
            f"{what} {value!r}: expected a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT_S:g} (a week)"
        )


def parse_seconds(what: str, text: str) -> float:
    """A timeout option's value: finite seconds in (0, MAX_TIMEOUT_S]; FleetError otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    try:
        _check_seconds(what, value if math.isfinite(value) else text)
    except FleetError:
        _check_seconds(what, text)  # the message shows what was given
    return value
