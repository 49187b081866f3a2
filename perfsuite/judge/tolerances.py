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

from fnmatch import fnmatchcase
from typing import Any

from perfsuite.errors import PerfsuiteError
from perfsuite.model.rules import Tolerances, is_fraction


def marker_tolerance(node_id: str, value: Any) -> float | None:
    """A check's ``@pytest.mark.perf(tolerance=...)``, checked: a fraction between 0 and 1."""
    if value is None:
        return None
    if not is_fraction(value):
        raise PerfsuiteError(
            f"{node_id}: @pytest.mark.perf(tolerance={value!r}) must be a fraction between 0 "
            "and 1 (0.05 is 5%)"
        )
    return float(value)


def resolve(
    rules: Tolerances, node_id: str, marker: float | None, fallback: float
) -> tuple[float, str]:
    """The tolerance for a check, and where it came from."""
    matches = [p for p in rules.checks if fnmatchcase(node_id, p)]
    if matches:
        pattern = max(matches, key=len)
        return rules.checks[pattern], f"{rules.path} [checks] {pattern!r}"
    checked = marker_tolerance(node_id, marker)
    if checked is not None:
        return checked, "marker"
    if rules.default is not None:
        return rules.default, f"{rules.path} default"
    return fallback, "option"
