"""Parameter cases for checks whose parameters depend on the device (shapes, precisions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfsuite.backends import Target


@dataclass(frozen=True)
class Case:
    """One parametrization of a check.

    ``full_only`` cases run only under ``--perf-full`` (the ``perf_full`` mark deselects them
    otherwise): the default mode runs each sweep's representatives.  ``sweep`` cases run in
    default and full mode; quick mode (the ``perf_sweep`` mark) keeps one case per family.
    """

    target: Target
    precision: str
    name: str
    spec: Any = None
    full_only: bool = False
    sweep: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The pytest id: backend-device[-precision]-name."""
        parts = [str(self.target), self.precision, self.name]
        return "-".join(p for p in parts if p)


def marks(full_only: bool = False, sweep: bool = False) -> list[Any]:
    """The mode marks of one case: ``perf_full`` (full mode only), ``perf_sweep`` (not quick)."""
    import pytest

    return [
        m for m, on in ((pytest.mark.perf_full, full_only), (pytest.mark.perf_sweep, sweep)) if on
    ]


def params(cases: list[Case]) -> list[Any]:
    """``pytest.param`` for each case, with its mode marks."""
    import pytest

    return [pytest.param(c, id=c.id, marks=marks(c.full_only, c.sweep)) for c in cases]
