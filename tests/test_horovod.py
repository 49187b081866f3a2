"""Horovod: the build script's patches, the skip reasons, the fusion-off case, and real ranks.

The unit tests need no Horovod: a fake package tree stands in for the installed one, and
the build script patches a copy of the two CMake files it touches.  The process tests run
only where a Horovod with its torch extension is installed (``tox -e horovod`` builds one):
two ranks under ``mpiexec`` meet through the Gloo rendezvous rank 0 serves, allreduce, and
train the POP check's CNN.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.checks import allreduce, scaling
from perfsuite.collectives import horovod
from perfsuite.collectives.launch import Launcher, free_loopback_ports
from perfsuite.judge.outcome import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "scripts" / "horovod-build"
MPIEXEC = Launcher.parse("mpiexec -n {ranks}")

needs_horovod_torch = pytest.mark.skipif(
    horovod.unavailable_reason(need_torch=True) is not None
    or MPIEXEC.unavailable_reason() is not None,
    reason=f"{horovod.unavailable_reason(need_torch=True) or MPIEXEC.unavailable_reason()}",
)


def _fake_horovod(root: Path, *extensions: str) -> None:
    package = root / "horovod"
    for sub in ("torch", "tensorflow"):
        (package / sub).mkdir(parents=True)
    (package / "__init__.py").write_text("")
    names = {
        "torch": "torch/mpi_lib_v2.cpython-311-x86_64-linux-gnu.so",
        "tensorflow": "tensorflow/mpi_lib.cpython-311-x86_64-linux-gnu.so",
    }
    for ext in extensions:
        (package / names[ext]).write_bytes(b"")


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory first on sys.path, where a fake horovod package can be put."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "horovod", raising=False)
    return tmp_path


def test_the_extensions_are_read_from_the_installed_files(fake_site: Path) -> None:
    _fake_horovod(fake_site, "tensorflow")
    assert horovod.extensions() == ("tensorflow",)


def test_a_horovod_built_without_torch_skips_the_torch_rows_saying_what_it_has(
    fake_site: Path,
) -> None:
    _fake_horovod(fake_site, "tensorflow")
    reason = horovod.unavailable_reason(need_torch=True)
    assert reason is not None
    assert "without a torch extension (built: tensorflow)" in reason
    assert "scripts/horovod-build" in reason


def test_a_horovod_with_no_extension_skips_every_row(fake_site: Path) -> None:
    _fake_horovod(fake_site)
    reason = horovod.unavailable_reason()
    assert reason is not None and "(built: none)" in reason


def test_a_missing_horovod_skips_with_the_build_script_as_its_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def without_horovod(name: str, *args: object) -> object:
        return None if name == "horovod" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_horovod)
    reason = horovod.unavailable_reason()
    assert reason is not None and reason.startswith("horovod is not installed")
    assert "tox -e horovod" in reason
    case = scaling.Case("horovod", "cpu", "weak", 2, "load_balance")
    assert scaling.unavailable_reason(case, MPIEXEC) == reason


def test_the_fusion_check_runs_horovod_twice_with_fusion_off_in_the_second() -> None:
    fusion = [c for c in allreduce.cases((2,)) if c.backend == "horovod" and not c.size]
    ids = sorted(c.id for c in fusion)
    assert ids == [
        "horovod-cpu-2ranks-fusion64",
        "horovod-cpu-2ranks-fusion64-threshold0",
        "horovod-gpu-2ranks-fusion64",
        "horovod-gpu-2ranks-fusion64-threshold0",
    ]
    assert not [c for c in allreduce.cases((2,)) if c.backend != "horovod" and c.fusion_threshold]


def test_fusion_off_sets_the_threshold_in_the_ranks_environment_and_the_params() -> None:
    from perfsuite.hardware.profile import ProfileRegistry
    from perfsuite.settings import Settings

    case = allreduce.Case("horovod", "cpu", 2, 0, sweep=True, fusion_threshold=0)
    profile = ProfileRegistry().load("a100")
    work = allreduce.workload(case, Settings(oversubscribe=True), profile)
    assert work.params["fusion_threshold"] == 0
    assert work.source is not None and work.source.env["HOROVOD_FUSION_THRESHOLD"] == "0"
    default = allreduce.workload(
        allreduce.Case("horovod", "cpu", 2, 0), Settings(oversubscribe=True), profile
    )
    assert "fusion_threshold" not in default.params
    assert default.source is not None and "HOROVOD_FUSION_THRESHOLD" not in default.source.env


def test_the_fusion_effect_is_fusion_off_over_fusion_on_and_needs_both() -> None:
    on = {"separate_us": 400.0, "fused_us": 100.0}
    off = {"separate_us": 1000.0, "fused_us": 100.0}
    effect = allreduce.horovod_fusion_effect({"fusion": on, "fusion_off": off})
    assert effect == {"fusion_off": off, "fusion_effect": 2.5}
    assert allreduce.horovod_fusion_effect({"fusion": on}) == {}


def _own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the environment for this test: what the rendezvous sets goes with it."""
    left_out = ("HOROVOD_", "RANK", "WORLD_SIZE", "PMI_", "OMPI_")
    own = {k: v for k, v in os.environ.items() if not k.startswith(left_out)}
    monkeypatch.setattr(os, "environ", own)


def test_a_non_zero_rank_takes_horovods_gloo_environment_from_the_launcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _own_environment(monkeypatch)
    with socket.socket() as rank0:  # rank 0's rendezvous, already listening
        rank0.bind(("127.0.0.1", 0))
        rank0.listen()
        port = rank0.getsockname()[1]
        for name, value in {"PMI_RANK": "1", "PMI_SIZE": "2", "MASTER_PORT": str(port)}.items():
            monkeypatch.setenv(name, value)
        assert horovod.gloo_rendezvous(mpi_built=False) is None
    assert os.environ["HOROVOD_RANK"] == "1" and os.environ["HOROVOD_SIZE"] == "2"
    assert os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"] == str(port)
    assert os.environ["HOROVOD_CONTROLLER"] == "gloo"


def test_an_mpi_build_under_mpiexec_is_left_to_mpi(monkeypatch: pytest.MonkeyPatch) -> None:
    _own_environment(monkeypatch)
    monkeypatch.setenv("PMI_RANK", "0")
    assert horovod.gloo_rendezvous(mpi_built=True) is None
    assert "HOROVOD_RANK" not in os.environ


def _cmake_files(tmp_path: Path) -> Path:
    """The lines of 0.28.1's three CMake files that the patches touch, in their places."""
    (tmp_path / "horovod" / "torch").mkdir(parents=True)
    (tmp_path / "horovod" / "tensorflow").mkdir(parents=True)
    (tmp_path / "CMakeLists.txt").write_text("project(horovod CXX)\nset(CMAKE_CXX_STANDARD 14)\n")
    (tmp_path / "horovod" / "torch" / "CMakeLists.txt").write_text(
        'if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")\n    set(CMAKE_CXX_STANDARD 14)\nendif()\n'
    )
    (tmp_path / "horovod" / "tensorflow" / "CMakeLists.txt").write_text(
        'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/mpi_ops.cc")\n'
        'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")\n'
    )
    return tmp_path


def _build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True, timeout=60)


def test_the_build_script_raises_the_cxx_standard_and_drops_the_xla_file(tmp_path: Path) -> None:
    src = _cmake_files(tmp_path)
    done = _build("--patch-only", str(src), "--cxx17", "--no-xla")
    assert done.returncode == 0, done.stderr
    assert "set(CMAKE_CXX_STANDARD 17)" in (src / "CMakeLists.txt").read_text()
    torch_cmake = (src / "horovod" / "torch" / "CMakeLists.txt").read_text()
    assert "STANDARD 17" in torch_cmake and "STANDARD 14" not in torch_cmake
    tf_cmake = (src / "horovod" / "tensorflow" / "CMakeLists.txt").read_text()
    assert "xla_mpi_ops.cc" not in tf_cmake and "mpi_ops.cc" in tf_cmake


def test_a_patch_that_does_not_fit_the_sdist_stops_the_build(tmp_path: Path) -> None:
    src = _cmake_files(tmp_path)
    assert _build("--patch-only", str(src), "--cxx17").returncode == 0
    again = _build("--patch-only", str(src), "--cxx17")  # already 17: nothing to raise
    assert again.returncode == EXIT_USAGE
    assert again.stderr.startswith("horovod-build: error: CMakeLists.txt has no")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "--python is required"),
        (("--python", "/nonexistent/python"), "not an executable interpreter"),
        (("--python", sys.executable, "--framework", "mxnet"), "--framework must be"),
        (("--bogus",), "unknown argument: --bogus"),
    ],
)
def test_the_build_script_refuses_bad_arguments_in_one_line(
    args: tuple[str, ...], fragment: str
) -> None:
    done = _build(*args)
    assert done.returncode == EXIT_USAGE
    assert f"horovod-build: error: {fragment}" in done.stderr.splitlines()[-1]


# ----------------------------------------------------------------------------- real ranks


def _ranks(module: str, *args: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    master, *workers = free_loopback_ports(3)
    command = MPIEXEC.command(2, list(args), worker=module)
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")},
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master),
        "PERFSUITE_COLLECTIVE_PORTS": ",".join(map(str, workers)),
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.integration
@needs_horovod_torch
@pytest.mark.parametrize("threshold", [None, "0"], ids=["fusion-default", "fusion-off"])
def test_two_horovod_ranks_allreduce_verified_and_fuse(threshold: str | None) -> None:
    env = {"HOROVOD_FUSION_THRESHOLD": threshold} if threshold else {}
    lines = _ranks(
        "perfsuite.collectives.worker",
        *("--backend", "horovod", "--sizes", "8,65536", "--samples", "2"),
        *("--sample-seconds", "0.02", "--fusion-tensors", "16", "--fusion-bytes", "65536"),
        env=env,
    )
    (layout,) = [line["layout"] for line in lines if "layout" in line]
    assert layout["library"] == "horovod.torch" and layout["ranks"] == 2
    assert layout["controller"] == "gloo"
    assert layout["fusion_threshold"] == (threshold or "default")
    sizes = {line["size"] for line in lines if "size" in line}
    assert sizes == {8, 65536}  # each verified on every rank, or the ranks exit non-zero
    fusion = [line for line in lines if "fused_seconds" in line]
    assert len(fusion) == 2 and fusion[0]["tensors"] == 16


@pytest.mark.integration
@needs_horovod_torch
def test_two_horovod_ranks_train_and_report_every_phase() -> None:
    lines = _ranks(
        "perfsuite.collectives.train",
        *("--backend", "horovod", "--batch", "8", "--steps", "3", "--threads", "1"),
    )
    (steps,) = [line["pop_steps"] for line in lines if "pop_steps" in line]
    assert steps["ranks"] == 2 and len(steps["per_rank"]) == 2
    for rank in steps["per_rank"]:
        assert len(rank["step"]) == 3 and all(s > 0 for s in rank["step"])
        assert all(c > 0 for c in rank["compute"])


def test_horovods_host_bandwidth_has_no_shared_memory_floor_as_gloo_goes_over_tcp() -> None:
    from perfsuite.hardware.profile import ProfileRegistry
    from perfsuite.settings import Settings

    case = allreduce.Case("horovod", "cpu", 2, 16 << 20)
    work = allreduce.workload(case, Settings(oversubscribe=True), ProfileRegistry().load("a100"))
    assert work.metric == "busbw" and work.reference is None
    assert "TCP sockets" in work.floor_note


@pytest.mark.integration
@pytest.mark.skipif(
    "tensorflow" not in horovod.extensions()
    or importlib.util.find_spec("tensorflow") is None
    or MPIEXEC.unavailable_reason() is not None,
    reason="no Horovod with its TensorFlow extension (scripts/horovod-build --framework "
    "tensorflow --no-xla), or no mpiexec",
)
def test_two_horovod_ranks_allreduce_through_horovod_tensorflow() -> None:
    lines = _ranks(
        "perfsuite.collectives.worker",
        *("--backend", "horovod", "--sizes", "8", "--samples", "2", "--sample-seconds", "0.02"),
        env={"PERFSUITE_HOROVOD_FRAMEWORK": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    (layout,) = [line["layout"] for line in lines if "layout" in line]
    assert layout["library"] == "horovod.tensorflow" and layout["ranks"] == 2
    assert [line["size"] for line in lines if "size" in line] == [8, 8]
