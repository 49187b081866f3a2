"""Parameter cases for checks whose parameters depend on the device (shapes, precisions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfsuite.backends import Target


@dataclass(frozen=True)
class Case:
    """One parametrization of a check.

    ``full_only`` cases are deselected by ``--perf-quick`` (through the ``perf_full`` mark).
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


def backend_of(item: Any) -> str | None:
    """The backend a collected test runs on, from its parameters or its ``perf_backend`` mark.

    None when it names none (it is then run whatever ``--perf-backend`` says).
    """
    marker = (
        item.get_closest_marker("perf_backend") if hasattr(item, "get_closest_marker") else None
    )
    if marker is not None and marker.args:
        return str(marker.args[0])
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        target = value if isinstance(value, Target) else getattr(value, "target", None)
        if isinstance(target, Target):
            return target.backend
        backend = getattr(value, "backend", None)
        if isinstance(backend, str):
            return backend
    return None


def outside(items: list[Any], backends: tuple[str, ...]) -> list[Any]:
    """The items that run on a backend other than ``backends`` (none when it is empty)."""
    if not backends:
        return []
    return [item for item in items if backend_of(item) not in (None, *backends)]
