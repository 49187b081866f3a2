"""What changed in the recorded stack at a change point, and what to run next.

The environment of the last run before a change and of the first run after it are diffed
with :func:`perfsuite.judge.compare.environment_diff` (the diff ``perfsuite compare`` prints), over
the fingerprint (packages, driver, CUDA, NCCL, kernel, host, perfsuite's version) and the
run's options (``settings``).  For each package whose version changed at a regression, the
``perfsuite bisect`` command that finds the first bad release between the two versions.
"""

from __future__ import annotations

import shlex
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
    bisect: tuple[str, ...]  # ready-to-run commands, one per package that moved up
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
    """The diff of two runs' environments and options, with bisect commands for packages."""
    diff = environment_diff(_fingerprint(before), _fingerprint(after))
    changes = tuple(EnvChange(k, old, new) for k, old, new in diff)
    commands: list[str] = []
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
        commands.append(
            f"perfsuite bisect --package {shlex.quote(package)} --good {shlex.quote(str(c.old))} "
            f"--bad {shlex.quote(str(c.new))} -- {shlex.quote(check)}"
        )
    return Attribution(before.run_id, after.run_id, changes, tuple(commands), tuple(held))
