"""What the end of a run wrote, and the typed reasons a baseline was not saved.

The rule that gives the reasons is :mod:`perfsuite.judge.admission`'s; the words are
:mod:`perfsuite.report.terminal`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from perfsuite.model.result import RunRecord
from perfsuite.model.verdicts import NoiseFlag


class Refused(StrEnum):
    """Why a result is kept out of a baseline."""

    FAILED = "failed"  # its outcome is a failure (a missed floor, a crash of its own)
    REGRESSED = "regressed"
    REGRESSED_WAIVED = "regressed-waived"  # still a regression: it would become the bar
    FLAGGED = "flagged"  # the noise guard flagged it (``flag`` says what)
    QUICK = "quick"  # quick mode's short samples


@dataclass(frozen=True)
class Refusal:
    """One reason a result is kept out of a baseline."""

    why: Refused
    flag: NoiseFlag | None = None  # FLAGGED: the noise guard's flag


class NotSaved(StrEnum):
    """Why a run saves no baseline at all, whatever its results."""

    INCOMPLETE = "incomplete"  # the run stopped before every selected check ran (why: the
    # record's ``incomplete``)
    CRASHED = "crashed"  # a selected check crashed (the record's ``crashed``), and the saves
    # were not forced


@dataclass
class Finished:
    """What the end of a run wrote, and what went wrong while writing it."""

    record: RunRecord
    record_path: Path | None = None
    html_path: Path | None = None
    baseline_path: Path | None = None
    saved: int = 0
    refused: dict[str, list[Refusal]] = field(default_factory=dict)  # by check id
    not_saved: NotSaved | None = None  # why no baseline was saved at all, when one was asked
    asked: bool = False  # --perf-save-baseline was given
    errors: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)  # outcomes changed by the whole family

    @property
    def save_failed(self) -> bool:
        """A baseline was asked for and not saved whole: the run must not exit 0."""
        return self.asked and bool(self.not_saved or self.refused or not self.baseline_path)
