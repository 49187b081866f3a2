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
        # The verdicts import scipy.stats on first use, and it loads numpy's fft extension,
        # which cannot be loaded twice in one process: imported here, before pytester's
        # snapshot of the loaded modules, it is kept (see _frameworks_imported_once).
        import scipy.stats  # noqa: F401

        # Each session appends its run to the results store, with DuckDB, whose extension
        # aborts the interpreter when imported twice: imported here, it is kept as well.
        try:
            import duckdb  # noqa: F401
        except ImportError:
            pass

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


# Under ``pytest -n 2`` each xdist worker takes one half of the collection, front to back,
# and a worker that runs out takes the back of the other's queue (pytest-xdist's work
# stealing; ``pytest_xdist_make_scheduler`` below).  The slow tests open the two halves, so
# the session ends on quick ones that even out the two workers; and each half pairs what
# mostly waits (a hung side, a hung rank) or runs one process with what keeps both cores
# busy (ranks, workers, fleet tasks).  Each entry groups tests by function; a group keeps
# its collection order (a module-scoped fixture's parameters stay together).
OPENING: tuple[tuple[tuple[str, ...], ...], ...] = (
    (
        ("tests/test_ab_processes.py::test_a_hung_side_is_killed_and_its_rounds_judge_nothing",),
        ("tests/test_ab_processes.py::test_bisect_names_the_release_that_made_the_work_slower",),
        (
            "tests/test_ab_processes.py::test_rounds_alternate_in_fresh_processes_and_keep_every_sample",
        ),
        ("tests/test_fuzz_loaders.py::test_a_mutated_record_through_every_command",),
        (
            "tests/test_kill_saves.py::test_a_writer_killed_mid_save_leaves_every_baseline_file_valid",
        ),
        (
            "tests/test_ab_processes.py::test_an_interrupt_writes_the_rounds_so_far_marked_incomplete",
        ),
        ("tests/test_allreduce.py::test_a_dead_or_hung_rank_fails_the_check_within_the_timeout",),
    ),
    (
        (
            "tests/test_scaling.py::test_one_rank_doing_twice_the_work_moves_load_balance_to_n_plus_1_over_2n",
            "tests/test_scaling.py::test_a_communication_delay_moves_communication_efficiency_and_not_load_balance",
            "tests/test_scaling.py::test_an_input_delay_moves_the_input_wait_share_and_not_load_balance",
        ),
        ("tests/test_scaling.py::test_the_quick_suite_records_the_pop_tree_and_draws_it",),
        ("tests/test_fleet_processes.py::test_mpiexec_with_a_hostfile_and_a_hung_node",),
        ("tests/test_verdict_rules.py::test_xdist_siblings_are_not_foreign_load",),
        (
            "tests/test_stream_workload.py::test_fidelity_against_a_bare_reference_is_computed_and_recorded",
        ),
        ("tests/test_allreduce.py::test_framework_collectives_run_across_processes",),
        ("tests/test_allreduce.py::test_two_mpi_ranks_measure_latency_busbw_and_fusion",),
    ),
)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, each half of the collection opens with its slow tests (:data:`OPENING`)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # only the workers collect
        return

    def group(item: pytest.Item, groups: tuple[tuple[str, ...], ...]) -> int | None:
        function = item.nodeid.split("[")[0]
        return next((i for i, g in enumerate(groups) if function in g), None)

    halves: list[list[pytest.Item]] = []
    rest = list(items)
    for groups in OPENING:
        chosen = [item for item in rest if group(item, groups) is not None]
        chosen.sort(key=lambda item: group(item, groups))  # stable: a group keeps its order
        halves.append(chosen)
        rest = [item for item in rest if group(item, groups) is None]
    first, second = halves
    # The scheduler gives the first len // 2 tests to one worker: fill the first half to it.
    fill = max(0, len(items) // 2 - len(first))
    items[:] = first + rest[:fill] + second + rest[fill:]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``-n`` without ``--dist``: pytest-xdist's work stealing, which :data:`OPENING` plans for."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


@pytest.fixture(scope="session")  # each call writes a folder of its own
def repeated_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[str]]:
    """Copies of a run record as ``n`` runs of a baseline: their own ids, samples 0.3% apart.

    A baseline of runs from fewer than 3 sessions cannot show its run-to-run spread and is
    judged with a cautious one; a test of what a confident verdict looks like gives its A side
    3 runs, a day apart.
    """

    def make(path: Path, n: int = 3) -> list[str]:
        folder = tmp_path_factory.mktemp("runs")
        data = json.loads(Path(path).read_text())
        out = []
        for i in range(n):
            copy = json.loads(json.dumps(data))
            copy["run_id"] = f"{data['run_id']}-{i}"
            copy["created"] = f"2026-11-{i + 1:02d}T00:00:00+00:00"  # a session each
            for result in copy["results"]:
                factor = 1 + 0.003 * (i - (n - 1) / 2)
                result["samples"] = [v * factor for v in result["samples"]]
            target = folder / f"run-{i}.json"
            target.write_text(json.dumps(copy))
            out.append(str(target))
        return out

    return make
