"""A profile's rules as judging reads them: its tolerances and its waivers.

The files (``tolerances.toml``, ``waivers.toml``) are read by :mod:`perfsuite.store.rules`;
which tolerance a check gets and which waiver covers it is :mod:`perfsuite.judge`'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def is_fraction(value: Any) -> bool:
    """A number strictly between 0 and 1 (not a bool): what every tolerance must be."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < 1


@dataclass(frozen=True)
class Tolerances:
    """The tolerance configuration of one profile."""

    default: float | None = None
    checks: dict[str, float] = field(default_factory=dict)
    path: Path | None = None


@dataclass(frozen=True)
class Waiver:
    """One waiver entry."""

    test: str
    reason: str
    expires: dt.date | None
    line: int

    def expired(self, today: dt.date) -> bool:
        """Whether the expiry date has been reached."""
        return self.expires is not None and today >= self.expires

    def applied(self, status: str) -> WaiverState:
        """The waiver as it applied to one check: ``applied``, ``stale`` or ``expired``."""
        expires = self.expires.isoformat() if self.expires else None
        return WaiverState(self.test, self.reason, status, expires)


@dataclass(frozen=True)
class WaiverState:
    """A waiver as it applied to one check, recorded with the check's result."""

    test: str = ""  # the waiver's pattern
    reason: str = ""
    # applied (a regression, waived), stale (it no longer regresses) or expired
    status: str = ""
    expires: str | None = None  # ISO date, or None

    def to_dict(self) -> dict[str, Any]:
        """The record's form."""
        return {
            "test": self.test,
            "reason": self.reason,
            "expires": self.expires,
            "status": self.status,
        }

    @classmethod
    def read(cls, data: Any) -> WaiverState | None:
        """A stored waiver (the loader checked its fields' kinds); None where there is none."""
        if not isinstance(data, Mapping):
            return None
        expires = data.get("expires")
        return cls(
            str(data.get("test", "")),
            str(data.get("reason", "")),
            str(data.get("status", "")),
            str(expires) if expires is not None else None,
        )
