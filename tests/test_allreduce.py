"""Allreduce: the model's arithmetic, the launcher's checks, and real ranks under mpiexec.

The process tests start real MPI ranks (mpi4py with the MPICH wheel, via ``mpiexec``); a
wrapper kills or stops one rank in the middle of a run to show that pytest ends with a
clear failure within the launch timeout and leaves no process behind.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite.checks import allreduce
from perfsuite.collectives import launch, worker
from perfsuite.collectives.launch import Launcher, LauncherError
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
_has_mpi = pytest.mark.skipif(
    Launcher.parse("mpiexec").unavailable_reason() is not None
    or not importlib.util.find_spec("mpi4py"),
    reason="mpiexec/mpi4py not installed; pip install 'perfsuite[mpi]'",
)


def needs_mpi(test: Any) -> Any:
    """Real ranks through mpiexec: an integration test, skipped without MPI."""
    return pytest.mark.integration(_has_mpi(test))


def test_alpha_beta_fit_recovers_the_model() -> None:
    alpha, beta, n = 3e-6, 1 / 5e9, 4
    sizes = [4 << i for i in range(25)]
    t = [2 * (n - 1) * alpha + 2 * (n - 1) / n * s * beta for s in sizes]
    fit = allreduce.fit_alpha_beta(sizes, t, n)
    assert fit is not None
    assert fit[0] == pytest.approx(alpha, rel=1e-6)
    assert fit[1] == pytest.approx(beta, rel=1e-6)
    assert allreduce.fit_alpha_beta([8], [1e-6], 2) is None


def test_busbw_is_algbw_times_two_n_minus_one_over_n() -> None:
    assert allreduce.busbw_factor(2) == 1.0
    assert allreduce.busbw_factor(8) == pytest.approx(1.75)


def test_sizes_double_from_4_bytes_to_64_mib_and_quick_uses_fewer() -> None:
    assert allreduce.FULL_SIZES[0] == 4 and allreduce.FULL_SIZES[-1] == 64 << 20
    assert all(b == 2 * a for a, b in itertools.pairwise(allreduce.FULL_SIZES))
    assert set(allreduce.QUICK_SIZES) < set(allreduce.FULL_SIZES)
    ids = [c.id for c in allreduce.cases((2,)) if not c.full_only]
    assert "mpi-cpu-2ranks-8B" in ids and "mpi-cpu-2ranks-16MiB" in ids
    assert "mpi-cpu-2ranks-fusion64" in ids


def test_a_wrong_element_fails_verification() -> None:
    base = worker.pattern(1000)
    good = worker.expected_sum(base, 3)
    worker.verify(good, base, 3, 4000)
    bad = good.copy()
    bad[417] += np.float32(1)
    with pytest.raises(worker.VerificationError, match="element 417"):
        worker.verify(bad, base, 3, 4000)


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("", "empty"),
        ("mpiexec -n '{ranks}", "does not parse"),
        ("mpiexec -n {nodes}", "unknown placeholder"),
    ],
)
def test_a_launcher_that_cannot_be_a_command_is_refused(template: str, fragment: str) -> None:
    with pytest.raises(LauncherError, match=fragment):
        Launcher.parse(template)


def test_more_local_ranks_than_cpus_is_refused_unless_oversubscribed() -> None:
    launcher = Launcher.parse("mpiexec -n {ranks}")
    cpus = len(os.sched_getaffinity(0))
    with pytest.raises(LauncherError, match="--perf-oversubscribe"):
        launcher.check_slots(cpus + 1, oversubscribe=False)
    launcher.check_slots(cpus + 1, oversubscribe=True)
    Launcher.parse("mpiexec -f hosts -n {ranks}").check_slots(cpus + 1, oversubscribe=False)
    Launcher.parse("srun -n {ranks}").check_slots(cpus + 1, oversubscribe=False)


def test_under_xdist_each_worker_counts_only_its_share_of_the_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(cpus))
    with pytest.raises(LauncherError, match=f"shared by {cpus} xdist workers"):
        Launcher.parse("mpiexec -n {ranks}").check_slots(2, oversubscribe=False)


@pytest.fixture(autouse=True)
def _not_under_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process pytester runs are one session of their own, whatever runs this file."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)


def test_a_missing_mpiexec_is_a_skip_with_an_install_hint() -> None:
    reason = Launcher.parse("/nonexistent/mpiexec -n {ranks}").unavailable_reason()
    assert reason is not None and "pip install 'perfsuite[mpi]'" in reason
    # Another launcher that cannot start is not skipped: the check fails, naming it.
    assert Launcher.parse("no-such-srun -n {ranks}").unavailable_reason() is None


def _script(path: Path, text: str = "") -> Path:
    """An executable shell script at ``path`` that prints ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{text}'\n" if text else "#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_an_mpiexec_beside_this_python_is_found_without_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A virtual environment's own mpiexec (the MPICH wheel's) is used when it is not activated."""
    python = tmp_path / "venv" / "bin" / "python"
    mpiexec = _script(python.parent / "mpiexec")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr(launch, "_in_environment", lambda: True)
    # Another mpiexec first on PATH (a system Open MPI's) does not win over the environment's.
    system = _script(tmp_path / "usr" / "bin" / "mpiexec")
    monkeypatch.setenv("PATH", str(system.parent))

    def launcher() -> Launcher:  # a new one each time: a launcher resolves its program once
        return Launcher.parse("mpiexec -n {ranks}")

    assert launcher().unavailable_reason() is None
    assert launcher().command(2, [])[:3] == [str(mpiexec), "-n", "2"]
    # A system Python's neighbours do not override PATH (module load, spack load) ...
    monkeypatch.setattr(launch, "_in_environment", lambda: False)
    assert launcher().executable == str(system)
    # ... and are still found when the name is nowhere on PATH.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert launcher().executable == str(mpiexec)
    mpiexec.unlink()
    reason = launcher().unavailable_reason()
    assert reason is not None and "not found on PATH or beside" in reason


def test_open_mpi_run_as_root_is_let_start_the_ranks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Open MPI's mpiexec refuses root (containers, GPU runners) unless told so, twice."""
    openmpi = _script(tmp_path / "openmpi" / "mpiexec", "mpiexec (OpenRTE) 4.1.6")
    allowed = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert Launcher.parse(f"{openmpi} -n {{ranks}}").environment() == allowed
    assert Launcher.parse(f"{openmpi} --hostfile hosts -n {{ranks}}").environment() == allowed
    # The ranks' environment carries it, and the record says so and names the program.
    case = allreduce.Case("torch", "cpu", 2, 1024)
    settings = Settings(launcher=f"{openmpi} -n {{ranks}}", oversubscribe=True)
    work = allreduce.workload(case, settings, ProfileRegistry().load("a100"))
    assert work.source is not None and work.source.env is not None
    assert {k: work.source.env[k] for k in allowed} == allowed
    assert work.context["launcher_env"] == sorted(allowed)
    assert work.context["launcher_program"] == str(openmpi)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert Launcher.parse(f"{openmpi} -n {{ranks}}").environment() == {}  # a user needs nothing
    work = allreduce.workload(case, settings, ProfileRegistry().load("a100"))
    assert "launcher_env" not in work.context
    mpich = _script(tmp_path / "mpich" / "mpiexec", "HYDRA build details:")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert Launcher.parse(f"{mpich} -n {{ranks}}").environment() == {}
    assert Launcher.parse("srun -n {ranks}").environment() == {}


def test_the_command_puts_this_python_and_the_worker_after_the_launcher() -> None:
    cmd = Launcher.parse("srun -n {ranks} --mpi=pmi2").command(4, ["--sizes", "8"])
    assert cmd[0] in (shutil.which("srun"), "srun")  # the path that will run, where known
    assert cmd[1:4] == ["-n", "4", "--mpi=pmi2"]
    assert cmd[4:7] == [sys.executable, "-m", "perfsuite.collectives.worker"]


# ----------------------------------------------------------------------------- real ranks

# A launch that works must not time out on a loaded 2-core runner (ranks that import numpy
# and mpi4py from a fresh environment took over 20 s there); the hang tests set their own.
INI = "[pytest]\nperf_quick = true\nperf_launch_timeout = 180\n"

# Runs the worker as a child; on rank 1 it kills (or stops) that child after a delay.
WRAPPER = """
import os, signal, subprocess, sys, time
rank = int(os.environ.get("PMI_RANK", "0"))
child = subprocess.Popen(sys.argv[2:], close_fds=False)  # keeps the PMI descriptor
if rank == 1:
    time.sleep(1.0)
    os.kill(child.pid, getattr(signal, sys.argv[1]))
    if sys.argv[1] == "SIGKILL":
        sys.exit(137)
sys.exit(child.wait())
"""


def _project(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    shutil.copy(ROOT / "suites" / "test_allreduce.py", pytester.path / "test_suite_allreduce.py")
    pytester.makepyfile(wrapper=WRAPPER)


def _workers_left(under: Path | None = None) -> list[str]:
    """Rank processes still alive; with ``under``, only those launched from that folder.

    Under xdist another test's ranks may be running beside this one's.
    """
    out = subprocess.run(
        ["pgrep", "-af", "perfsuite.collectives.worker"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in out.splitlines()
        if "pgrep" not in line and (under is None or str(under) in line)
    ]


@needs_mpi
def test_two_mpi_ranks_measure_latency_busbw_and_fusion(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makeconftest((ROOT / "tests" / "fixtures" / "sweep_too.py").read_text())  # fusion
    result = pytester.runpytest("-k", "mpi and (8B or 16MiB or fusion)", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    (path,) = (pytester.path / "reports").rglob("*.json")
    record = json.loads(path.read_text())
    by_id = {r["id"].split("[")[1].rstrip("]"): r for r in record["results"]}
    small = by_id["mpi-cpu-2ranks-8B"]
    assert small["metric"] == "latency" and small["higher_is_better"] is False
    assert small["source"]["kind"] == "ranks"
    assert by_id["mpi-cpu-2ranks-16MiB"]["metric"] == "busbw"
    big = by_id["mpi-cpu-2ranks-16MiB"]
    # Ranks on one host: no figure bounds shared memory, and the check says so.
    assert big["floor"]["verdict"] == "no-reference"
    assert "shared memory" in big["floor"]["note"]
    (curve,) = record["derived"]["allreduce"]["curves"]
    if curve["layout"]["timer"].startswith("C loop"):  # mpicc beside this Python
        assert all(p["binding_latency_us"] > 0 for p in curve["points"])
    assert curve["layout"]["thread_level"] == "funneled"
    assert curve["layout"]["ranks"] == 2 and curve["layout"]["launcher"] == "mpiexec -n {ranks}"
    assert sum(curve["layout"]["hosts"].values()) == 2
    assert [p["size"] for p in curve["points"]] == [8, 16 << 20]
    assert curve["alpha_us"] is not None and curve["beta_ns_per_byte"] is not None
    assert curve["fusion"]["tensors"] == allreduce.FUSION_TENSORS
    assert curve["fusion"]["speedup"] > 0
    html = path.with_suffix(".html").read_text()
    assert 'id="chart-allreduce"' in html or "Allreduce" in html


def _mpi_lines(command: list[str]) -> list[dict[str, Any]]:
    mpiexec = Launcher.parse("mpiexec").executable
    done = subprocess.run(
        [mpiexec, "-n", "2", *command], capture_output=True, text=True, timeout=180, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.smoke
@needs_mpi
def test_the_mpi_figure_is_the_collective_beside_an_osu_c_loop(
    tmp_path: Path, record_property: Any
) -> None:
    """The worker's 8 B figure against the C reference program, in the same test.

    The reference is a plain MPI program (tests/fixtures/allreduce_reference.c) compiled
    here.  Both time 8 B allreduces between two ranks; the worker times them in a C loop
    over mpi4py's communicator, and mpi4py's own calls beside it.  Their figures go into
    the test's properties (JUnit XML); the ratio is measured in lab/allreduce_gap.py, not
    asserted here, as no test asserts a timing.
    """
    from perfsuite.collectives import native_loop

    mpicc = native_loop.mpi_compiler()
    if mpicc is None:
        pytest.skip("no MPI compiler wrapper (mpicc): the C reference cannot be built")
    program = tmp_path / "allreduce_reference"
    source = ROOT / "tests" / "fixtures" / "allreduce_reference.c"
    subprocess.run([mpicc, "-O2", "-o", str(program), str(source)], check=True, timeout=120)
    reference = _mpi_lines([str(program), "8", "20000", "5"])
    rank_lines = _mpi_lines(
        [sys.executable, "-m", "perfsuite.collectives.worker", "--backend", "mpi",
         "--sizes", "8", "--samples", "5"]
    )  # fmt: skip
    (layout,) = [line["layout"] for line in rank_lines if "layout" in line]
    samples = [line for line in rank_lines if "seconds" in line]
    assert layout["timer"].startswith("C loop in the rank"), layout["timer"]
    assert layout["thread_level"] == "funneled"
    assert len(reference) == 5 and len(samples) == 5
    assert all(s["binding_seconds"] > 0 and s["seconds"] > 0 for s in samples)
    c_loop = float(np.median([r["seconds"] for r in reference]))
    figure = float(np.median([s["seconds"] for s in samples]))
    binding = float(np.median([s["binding_seconds"] for s in samples]))
    record_property("c_loop_us", round(c_loop * 1e6, 3))
    record_property("mpi_figure_us", round(figure * 1e6, 3))
    record_property("mpi4py_calls_us", round(binding * 1e6, 3))


def test_without_mpicc_the_worker_says_why_and_times_mpi4py(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No wrapper: no C loop, and the reason is the timer's name."""
    from perfsuite.collectives import native_loop

    monkeypatch.setenv("PERFSUITE_MPICC", str(tmp_path / "no-such-mpicc"))
    loop, why = native_loop.load(object(), object())
    assert loop is None and "mpicc" in why


@needs_mpi
@pytest.mark.parametrize("backend", ["torch", "tensorflow"])
def test_framework_collectives_run_across_processes(
    pytester: pytest.Pytester, backend: str
) -> None:
    """torch.distributed (gloo) and TF's MultiWorkerMirroredStrategy, on loopback ports."""
    if importlib.util.find_spec(backend) is None:  # not imported here: ranks import it
        pytest.skip(f"{backend} is not installed")
    _project(pytester)
    # Each rank imports its framework (TF: about 9 s on an idle 2-core VM).
    result = pytester.runpytest("-k", f"{backend}-cpu-2ranks-8B", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (path,) = (pytester.path / "reports").rglob("*.json")
    (curve,) = json.loads(path.read_text())["derived"]["allreduce"]["curves"]
    assert curve["backend"] == backend and curve["layout"]["ranks"] == 2
    assert curve["points"][0]["latency_us"] > 0


# The launch timeout of the dead or hung rank: the wrapper strikes 1 s after the rank starts,
# long before it; the 200 samples the ranks are asked for would outlast it (18 s on a 2-core
# VM), so the launch ends by the rank's death or by the timeout, never by itself.
HUNG_TIMEOUT_S = 10


@needs_mpi
@pytest.mark.parametrize(
    ("signal_name", "fragment"),
    # A killed rank: MPICH either aborts the job (a non-zero exit) or leaves the other rank
    # waiting until the launch timeout; both must end the check, clearly, in time.
    [
        ("SIGKILL", ("exited with status", f"no result within {HUNG_TIMEOUT_S} s")),
        ("SIGSTOP", (f"no result within {HUNG_TIMEOUT_S} s",)),
    ],
    ids=["rank-killed", "rank-hung"],
)
def test_a_dead_or_hung_rank_fails_the_check_within_the_timeout(
    pytester: pytest.Pytester, signal_name: str, fragment: tuple[str, ...]
) -> None:
    _project(pytester)
    launcher = f"mpiexec -n {{ranks}} {sys.executable} {pytester.path / 'wrapper.py'} {signal_name}"
    start = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-k", "mpi-cpu-2ranks-16MiB", "--perf-samples", "200", "--perf-launcher", launcher,
        "--perf-allow-empty", "-p", "no:cacheprovider",
        "--perf-launch-timeout", str(HUNG_TIMEOUT_S),
    )  # fmt: skip
    elapsed = time.monotonic() - start
    result.assert_outcomes(failed=1)
    assert any(f in result.stdout.str() for f in fragment), result.stdout.str()[-2000:]
    assert "Traceback" not in result.stdout.str()
    assert elapsed < HUNG_TIMEOUT_S + 30, f"took {elapsed:.0f} s"
    time.sleep(0.5)
    assert not _workers_left(pytester.path), _workers_left(pytester.path)


@needs_mpi
def test_the_environments_own_mpiexec_starts_ranks_when_it_is_not_on_path(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``.venv/bin/pytest`` without activating the environment still runs the collectives."""
    here = Path(sys.executable).parent
    if not (here / "mpiexec").exists():
        pytest.skip(f"no mpiexec beside {sys.executable} (MPICH from elsewhere)")
    _project(pytester)
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv(
        "PATH", os.pathsep.join(d for d in dirs if d and not (Path(d) / "mpiexec").exists())
    )
    assert shutil.which("mpiexec") is None
    result = pytester.runpytest_subprocess("-k", "mpi and 8B", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@needs_mpi
def test_more_ranks_than_cpus_fails_with_the_option_to_allow_it(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    too_many = str(len(os.sched_getaffinity(0)) + 1)
    result = pytester.runpytest("-k", "mpi and 8B", "--perf-ranks", too_many)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CPUs here*--perf-oversubscribe*"])


def test_bad_rank_counts_and_launchers_are_usage_errors(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("--perf-ranks", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--perf-ranks" in "\n".join(result.errlines)
    result = pytester.runpytest("--perf-launcher", "mpiexec -n '{ranks}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "does not parse" in "\n".join(result.errlines)
