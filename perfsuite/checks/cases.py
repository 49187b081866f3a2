"""Parameter cases for checks whose parameters depend on the device (shapes, precisions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfsuite.backends import Target


@dataclass(frozen=True)
class Case:
    """One parametrization of a check.

    ``full_only`` cases run only under ``--perf-full`` (the ``perf_full`` mark deselects them
    otherwise): the default and quick modes run each sweep's representatives.
    """

    target: Target
    precision: str
    name: str
    spec: Any = None
    full_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The pytest id: backend-device[-precision]-name."""
        parts = [str(self.target), self.precision, self.name]
        return "-".join(p for p in parts if p)


def params(cases: list[Case]) -> list[Any]:
    """``pytest.param`` for each case, with the ``perf_full`` mark on full-mode-only ones."""
    import pytest

    return [
        pytest.param(c, id=c.id, marks=[pytest.mark.perf_full] if c.full_only else [])
        for c in cases
    ]
