"""Shared set-up for perfsuite's own tests."""

from __future__ import annotations

# The report draws with matplotlib.  pytester's in-process runs drop the modules imported
# during a run when it ends; a matplotlib half imported before a run (by a test in this
# process) and half during it would then be imported twice, and its classes stop matching
# each other (``isinstance`` checks inside matplotlib fail).  Imported whole, up front, it
# stays one.
import matplotlib.backends.backend_svg
import matplotlib.figure  # noqa: F401
import pytest


@pytest.fixture(autouse=True)
def _pytester_baselines(request: pytest.FixtureRequest) -> None:
    """A pytester project starts as a checkout does: with an empty ``baselines/`` folder."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").mkdir("baselines")
