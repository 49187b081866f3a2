"""A profile's rules as judging reads them: its tolerances and its waivers.

The files (``tolerances.toml``, ``waivers.toml``) are read by :mod:`perfsuite.store.rules`;
which tolerance a check gets and which waiver covers it is :mod:`perfsuite.judge`'s.
"""

from __future__ import annotations

import datetime as dt
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

    def to_dict(self, status: str) -> dict[str, Any]:
        """JSON-ready, with how it was applied: applied, stale or expired."""
        return {
            "test": self.test,
            "reason": self.reason,
            "expires": self.expires.isoformat() if self.expires else None,
            "status": status,
        }
