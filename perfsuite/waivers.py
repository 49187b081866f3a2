"""Waivers: known regressions, marked with a reason (in the spirit of ReFrame's xfail).

``baselines/<profile>/waivers.toml``::

    schema_version = 1

    [[waiver]]
    test = "suites/test_memory_bandwidth.py::test_stream[[]tensorflow-*"
    reason = "XLA CPU copy regression in TF 2.21, tracked upstream"
    expires = 2027-01-31        # optional; from that day on the waiver no longer applies

A waiver turns a *regressed* verdict into an expected failure (xfail) with its reason.  A
waived check that no longer regresses is reported as a *stale* waiver; an expired waiver
does not apply and is reported as expired.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from perfsuite.errors import StorageError
from perfsuite.storage import check_toml_keys, read_toml

FILENAME = "waivers.toml"
SCHEMA_VERSION = 1


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


def rejudged(waiver: Mapping[str, Any] | None, verdict: str) -> dict[str, Any] | None:
    """A recorded waiver's status once its check's baseline verdict is decided again.

    A waiver that was in force (applied or stale) applies to a regression and is stale
    otherwise; an expired one stays expired.
    """
    if not waiver:
        return None
    if waiver.get("status") not in ("applied", "stale"):
        return dict(waiver)
    return {**waiver, "status": "applied" if verdict == "regressed" else "stale"}


def _header_lines(text: str) -> list[int]:
    return [
        i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith("[[waiver]]")
    ]


def load(profile_dir: Path) -> list[Waiver]:
    """Read a profile's waivers; a malformed entry is an error naming its line."""
    path = profile_dir / FILENAME
    if not path.exists():
        return []
    data = read_toml(path, "waivers file")
    check_toml_keys(path, data, SCHEMA_VERSION, {"waiver"}, "; expected [[waiver]] entries")
    entries = data.get("waiver", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise StorageError(f"{path}: 'waiver' must be [[waiver]] tables, got {entries!r:.60}")
    lines = _header_lines(path.read_text(encoding="utf-8"))
    waivers = []
    for index, entry in enumerate(entries):
        line = lines[index] if index < len(lines) else 0
        where = f"{path}:{line}"
        extra = set(entry) - {"test", "reason", "expires"}
        if extra:
            raise StorageError(f"{where}: unknown key(s) {', '.join(sorted(extra))} in [[waiver]]")
        for key in ("test", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise StorageError(f"{where}: [[waiver]] needs a non-empty '{key}'")
        expires = entry.get("expires")
        if expires is not None and (
            not isinstance(expires, dt.date) or isinstance(expires, dt.datetime)
        ):
            raise StorageError(
                f"{where}: 'expires' must be a date like 2027-01-31, got {expires!r}"
            )
        waivers.append(Waiver(entry["test"], entry["reason"], expires, line))
    return waivers


def find(waivers: list[Waiver], node_id: str) -> Waiver | None:
    """The first waiver whose pattern matches a test id."""
    return next((w for w in waivers if fnmatchcase(node_id, w.test)), None)
