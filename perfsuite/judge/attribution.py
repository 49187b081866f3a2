"""What changed in the recorded stack at a change point, and what to run next.

The environment of the last run before a change and of the first run after it are diffed
with :func:`perfsuite.judge.compare.environment_diff` (the diff ``perfsuite compare`` prints), over
the fingerprint (packages, driver, CUDA, NCCL, kernel, host, perfsuite's version) and the
run's options (``settings``).  Each package whose version moved up at a regression is one to
bisect (``perfsuite bisect`` finds the first bad release between the two versions; the
command is worded by :mod:`perfsuite.report.history_text`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from perfsuite.judge.compare import environment_diff
from perfsuite.model import RunRecord

# Versions under ``software`` that are not packages one bisects on an index.
_NOT_BISECTED = frozenset({"python", "python_implementation", "perfsuite"})


@dataclass(frozen=True)
class EnvChange:
    """One recorded fact that differs: its dotted key, before and after."""

    key: str
    old: Any
    new: Any


@dataclass(frozen=True)
class PackageMove:
    """A package whose recorded version changed."""

    package: str
    old: Any
    new: Any


@dataclass(frozen=True)
class Attribution:
    """What changed between the run before a change point and the run after it."""

    before_run: str
    after_run: str
    changes: tuple[EnvChange, ...]
    # The packages that moved up at a regression, each one to bisect between its versions
    bisect: tuple[PackageMove, ...]
    check: str = ""  # the check the change point is in (what a bisection runs)
    # Packages that moved at a regression but not up (a downgrade, or versions that do not
    # order): bisect searches an upgrade, so they get no command.
    not_bisected: tuple[PackageMove, ...] = ()


def _fingerprint(record: RunRecord) -> dict[str, Any]:
    return {**record.environment, "options": dict(record.settings)}


def _package(key: str) -> str | None:
    """The package a ``software.<name>.version`` key names (or None)."""
    parts = key.split(".")
    if len(parts) == 3 and parts[0] == "software" and parts[2] == "version":
        return None if parts[1] in _NOT_BISECTED else parts[1]
    return None


def _upgrade(old: Any, new: Any) -> bool | None:
    try:
        return Version(str(old)) < Version(str(new))
    except InvalidVersion:
        return None


def attribute(before: RunRecord, after: RunRecord, *, check: str, direction: str) -> Attribution:
    """The diff of two runs' environments and options, with the packages to bisect."""
    diff = environment_diff(_fingerprint(before), _fingerprint(after))
    changes = tuple(EnvChange(k, old, new) for k, old, new in diff)
    moved_up: list[PackageMove] = []
    held: list[PackageMove] = []
    for c in changes:
        package = _package(c.key)
        if package is None or c.old is None or c.new is None:
            continue
        if direction != "regressed":
            continue
        if not _upgrade(c.old, c.new):
            held.append(PackageMove(package, c.old, c.new))
            continue
        moved_up.append(PackageMove(package, c.old, c.new))
    return Attribution(
        before.run_id,
        after.run_id,
        changes,
        tuple(moved_up),
        check=check,
        not_bisected=tuple(held),
    )
