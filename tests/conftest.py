"""Shared set-up for perfsuite's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _pytester_baselines(request: pytest.FixtureRequest) -> None:
    """A pytester project starts as a checkout does: with an empty ``baselines/`` folder."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").mkdir("baselines")
