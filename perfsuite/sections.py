"""Derived sections of a run record (roofline, knob speedups, ...), registered by checks.

A check module that derives a cross-result section registers a function here at import; the
session computes every registered section when it assembles the record.  The core never
imports a check: it only calls what was registered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.hardware.profile import HardwareProfile
from perfsuite.model import Result

Section = Callable[[HardwareProfile, Sequence[Result]], Any]
_SECTIONS: dict[str, Section] = {}


def register(name: str, fn: Section) -> Section:
    """Register a derived section under ``name`` (the key in the record's ``derived``)."""
    _SECTIONS[name] = fn
    return fn


def compute(profile: HardwareProfile, results: Sequence[Result]) -> dict[str, Any]:
    """Every registered section, computed over a run's results."""
    return {name: fn(profile, results) for name, fn in sorted(_SECTIONS.items())}
