"""Regression tolerances: per check (marker), per profile (``tolerances.toml``), default.

Which one wins, most specific first:

1. a pattern in ``baselines/<profile>/tolerances.toml`` ``[checks]`` that matches the test
   id (the operator of this hardware knows its noise best);
2. the check's own ``@pytest.mark.perf(tolerance=...)`` (the check author's default);
3. ``default`` in ``baselines/<profile>/tolerances.toml``;
4. ``--perf-tolerance`` / ``perf_tolerance`` (5% unless set).

Example::

    schema_version = 1
    default = 0.08
    [checks]
    "*test_stream[[]numpy-cpu-*" = 0.12

Patterns are ``fnmatch`` patterns over the full pytest node id; where several match, the
longest pattern wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError, StorageError
from perfsuite.storage import check_toml_keys, read_toml

FILENAME = "tolerances.toml"
SCHEMA_VERSION = 1


def _is_fraction(value: Any) -> bool:
    """A number strictly between 0 and 1 (not a bool): what every tolerance must be."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < 1


def _fraction(path: Path, key: str, value: Any) -> float:
    if not _is_fraction(value):
        raise StorageError(f"{path}: '{key}' must be a fraction between 0 and 1, got {value!r}")
    return float(value)


def marker_tolerance(node_id: str, value: Any) -> float | None:
    """A check's ``@pytest.mark.perf(tolerance=...)``, checked: a fraction between 0 and 1."""
    if value is None:
        return None
    if not _is_fraction(value):
        raise PerfsuiteError(
            f"{node_id}: @pytest.mark.perf(tolerance={value!r}) must be a fraction between 0 "
            "and 1 (0.05 is 5%)"
        )
    return float(value)


@dataclass(frozen=True)
class Tolerances:
    """The tolerance configuration of one profile."""

    default: float | None = None
    checks: dict[str, float] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, profile_dir: Path) -> Tolerances:
        """Read ``tolerances.toml`` from a profile's baseline directory, if present."""
        path = profile_dir / FILENAME
        if not path.exists():
            return cls()
        data = read_toml(path, "tolerances file")
        check_toml_keys(path, data, SCHEMA_VERSION, {"default", "checks"})
        default = _fraction(path, "default", data["default"]) if "default" in data else None
        checks_raw = data.get("checks", {})
        if not isinstance(checks_raw, dict):
            raise StorageError(f"{path}: 'checks' must be a table of pattern = fraction")
        checks = {k: _fraction(path, f"checks.{k}", v) for k, v in checks_raw.items()}
        return cls(default, checks, path)

    def resolve(self, node_id: str, marker: float | None, fallback: float) -> tuple[float, str]:
        """The tolerance for a check, and where it came from."""
        matches = [p for p in self.checks if fnmatchcase(node_id, p)]
        if matches:
            pattern = max(matches, key=len)
            return self.checks[pattern], f"{self.path} [checks] {pattern!r}"
        checked = marker_tolerance(node_id, marker)
        if checked is not None:
            return checked, "marker"
        if self.default is not None:
            return self.default, f"{self.path} default"
        return fallback, "option"
