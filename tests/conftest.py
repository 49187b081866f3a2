"""Shared set-up for perfsuite's own tests."""

from __future__ import annotations

# The report draws with matplotlib.  pytester's in-process runs drop the modules imported
# during a run when it ends; a matplotlib half imported before a run (by a test in this
# process) and half during it would then be imported twice, and its classes stop matching
# each other (``isinstance`` checks inside matplotlib fail).  Imported whole, up front, it
# stays one.
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib.backends.backend_svg
import matplotlib.figure  # noqa: F401
import pytest


def _frameworks_imported_once() -> None:
    """Import the installed frameworks before pytester notes which modules are loaded.

    pytester drops, when a test ends, every module imported during it.  TensorFlow cannot be
    imported twice in one process (its second import aborts the interpreter: "Check failed:
    PyExceptionRegistry::Init() already called"), so a framework first imported inside a
    pytester test would take down the next test that imports it.  Imported before the
    snapshot, it is kept.
    """
    import importlib
    import importlib.util

    for name in ("tensorflow", "torch"):
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


# What a pytest that a test starts (pytester's, perfsuite ab's sides, a fleet's tasks) gets
# besides its own options: no Hypothesis plugin.  The plugin imports all of Hypothesis when
# a session ends (0.7 s of each such session), and none of them uses it.
CHILD_ADDOPTS = "-p no:hypothesispytest"


@pytest.fixture(autouse=True, scope="session")
def _child_sessions_without_hypothesis() -> Iterator[None]:
    """The sessions that tests start skip Hypothesis's plugin (:data:`CHILD_ADDOPTS`).

    This session keeps it (the fuzz tests use it): the variable is set once its xdist
    workers have started.  pytester drops the variable; ``_pytester_baselines`` sets it
    again.
    """
    with pytest.MonkeyPatch.context() as monkeypatch:
        outer = os.environ.get("PYTEST_ADDOPTS", "")
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{outer} {CHILD_ADDOPTS}".strip())
        yield


@pytest.fixture(autouse=True)
def _pytester_baselines(request: pytest.FixtureRequest) -> None:
    """A pytester project starts as a checkout does: with an empty ``baselines/`` folder.

    Its runs read a steady machine (``perfsuite.testing``) through perfsuite's measurement
    seam, so a busy test runner never changes the outcome a test asserts; a test marked
    ``integration`` reads the real machine (it is about processes, load or hardware).
    """
    if "pytester" in request.fixturenames:
        if request.node.get_closest_marker("integration") is not None:
            _frameworks_imported_once()
        request.getfixturevalue("pytester").mkdir("baselines")
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)  # pytester dropped the outer ones
        # A pytest the test starts is a session of its own, even when this one runs under
        # pytest-xdist (whose variables would switch pytest-benchmark off in it).
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)
        if request.node.get_closest_marker("integration") is None:
            # Read by every pytest the test starts, in this process or a child.
            monkeypatch.setenv("PYTEST_PLUGINS", "perfsuite.testing")


@pytest.fixture
def repeated_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[str]]:
    """Copies of a run record as ``n`` runs of a baseline: their own ids, samples 0.3% apart.

    A baseline of fewer than 3 runs cannot show its run-to-run spread and is judged with a
    cautious one; a test of what a confident verdict looks like gives its A side 3 runs.
    """

    def make(path: Path, n: int = 3) -> list[str]:
        folder = tmp_path_factory.mktemp("runs")
        data = json.loads(Path(path).read_text())
        out = []
        for i in range(n):
            copy = json.loads(json.dumps(data))
            copy["run_id"] = f"{data['run_id']}-{i}"
            for result in copy["results"]:
                factor = 1 + 0.003 * (i - (n - 1) / 2)
                result["samples"] = [v * factor for v in result["samples"]]
            target = folder / f"run-{i}.json"
            target.write_text(json.dumps(copy))
            out.append(str(target))
        return out

    return make
