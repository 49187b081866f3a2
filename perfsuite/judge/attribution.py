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

NOTHING = "nothing in the recorded environment changed"
# Versions under ``software`` that are not packages one bisects on an index.
_NOT_BISECTED = frozenset({"python", "python_implementation", "perfsuite"})


@dataclass(frozen=True)
class EnvChange:
    """One recorded fact that differs: its dotted key, before and after."""

    key: str
    old: Any
    new: Any


@dataclass(frozen=True)
class Attribution:
    """What changed between the run before a change point and the run after it."""

    before_run: str
    after_run: str
    changes: tuple[EnvChange, ...]
    bisect: tuple[str, ...]  # ready-to-run commands, one per package that moved up
    notes: tuple[str, ...]  # why a changed package has no command

    def lines(self) -> list[str]:
        """The attribution as short lines for the terminal and the page."""
        if not self.changes:
            return [f"{NOTHING} ({self.before_run} -> {self.after_run})"]
        out = [f"{c.key}: {c.old!r} -> {c.new!r}" for c in self.changes]
        return out + [f"next: {cmd}" for cmd in self.bisect] + list(self.notes)


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
    commands, notes = [], []
    for c in changes:
        package = _package(c.key)
        if package is None or c.old is None or c.new is None:
            continue
        if direction != "regressed":
            continue
        if not _upgrade(c.old, c.new):
            notes.append(
                f"{package} went from {c.old} to {c.new}: bisect searches an upgrade for a "
                "slowdown; run perfsuite ab on the two stacks instead"
            )
            continue
        commands.append(
            f"perfsuite bisect --package {shlex.quote(package)} --good {shlex.quote(str(c.old))} "
            f"--bad {shlex.quote(str(c.new))} -- {shlex.quote(check)}"
        )
    return Attribution(before.run_id, after.run_id, changes, tuple(commands), tuple(notes))
