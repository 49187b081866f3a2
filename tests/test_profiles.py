"""Unit tests: loading, validating and detecting hardware profiles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfsuite.errors import ProfileError
from perfsuite.hardware.detect import HostFacts, cpu_profile, last_level_cache_bytes
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry, load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"

# Datasheet figures from the product brief: fp32, tf32, fp16, bandwidth (GB/s).
BRIEF = {
    "v100": (15.7, None, 125, 900),
    "a100": (19.5, 156, 312, 1555),
    "a100-80gb": (19.5, 156, 312, 2039),
    "h100-sxm": (67, 494.5, 989.5, 3350),
    "h100-pcie": (51, 378, 756, 2000),
    "h200": (67, 494.5, 989.5, 4800),
    # Not in the brief's table; from NVIDIA's datasheets (dense figures: half the sparse ones).
    "a100-pcie": (19.5, 156, 312, 1555),
    "a100-80gb-pcie": (19.5, 156, 312, 1935),
    "h100-nvl": (60, 417.5, 835.5, 3900),
    "h200-nvl": (60, 417.5, 835.5, 4800),
    "mi250x": (23.95, None, 191.5, 1600),  # per GCD: half the package datasheet
}

VALID = """\
schema_version = 1
name = "{name}"
description = "test"
kind = "gpu"
source = "test"

[memory]
bandwidth_gbs = 100
last_level_cache_mib = 4

[compute]
fp32_tflops = 1
"""


def write(tmp_path: Path, text: str, name: str = "mygpu") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_builtin_profiles_hold_the_datasheet_figures() -> None:
    registry = ProfileRegistry()
    assert registry.names() == sorted(BRIEF)
    for name, (fp32, tf32, fp16, bandwidth) in BRIEF.items():
        profile = registry.load(name)
        assert profile.figure("compute.fp32_tflops") == fp32
        assert profile.figure("compute.tf32_tflops") == tf32
        assert profile.figure("compute.fp16_tflops") == fp16
        assert profile.figure("memory.bandwidth_gbs") == bandwidth
        assert profile.source and profile.kind == "gpu"
        assert not profile.estimated
    # fp8 (dense) where the device has fp8 tensor cores: Hopper, not Ampere.
    fp8 = {n: ProfileRegistry().load(n).figure("compute.fp8_tflops") for n in BRIEF}
    assert fp8["h100-sxm"] == fp8["h200"] == 1979 and fp8["h100-pcie"] == 1513
    assert fp8["a100"] is None and fp8["a100-80gb-pcie"] is None


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace('source = "test"\n', ""), "source"),
        (lambda t: t.replace("bandwidth_gbs = 100", "bandwidth_gbs = -5"), "memory.bandwidth_gbs"),
        (
            lambda t: t.replace("bandwidth_gbs = 100", 'bandwidth_gbs = "fast"'),
            "memory.bandwidth_gbs",
        ),
        (
            lambda t: t.replace("fp32_tflops = 1", "fp32_tflops = 1\nfp6_tflops = 2"),
            "compute.fp6_tflops",
        ),
        (lambda t: "colour = 'green'\n" + t, "colour"),
        (lambda t: t.replace("last_level_cache_mib = 4\n", ""), "memory.last_level_cache_mib"),
        (lambda t: t.replace('kind = "gpu"', 'kind = "tpu"'), "kind"),
        (lambda t: t.replace('name = "mygpu"', 'name = "other"'), "name"),
        (lambda t: t.replace("schema_version = 1", "schema_version = 2"), "schema_version"),
    ],
)
def test_malformed_profile_names_file_and_field(tmp_path: Path, edit, field: str) -> None:
    path = write(tmp_path, edit(VALID.format(name="mygpu")))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert str(path) in message
    assert f"'{field}'" in message
    assert "\n" not in message


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name = [unclosed\n")
    with pytest.raises(ProfileError, match="malformed profile") as info:
        load_profile(path)
    assert str(path) in str(info.value)


def test_user_directory_adds_and_overrides(tmp_path: Path) -> None:
    write(tmp_path, VALID.format(name="mygpu"))
    write(
        tmp_path,
        VALID.format(name="a100").replace("bandwidth_gbs = 100", "bandwidth_gbs = 1400"),
        "a100",
    )
    registry = ProfileRegistry([tmp_path])
    assert "mygpu" in registry.names()
    assert registry.load("a100").figure("memory.bandwidth_gbs") == 1400
    assert registry.load("a100").origin == str(tmp_path / "a100.toml")


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(
        ProfileError,
        match=r"unknown hardware profile 'a1000'; did you mean .*known: a100, a100-80gb",
    ):
        ProfileRegistry().load("a1000")


def test_missing_profile_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        ProfileRegistry([tmp_path / "nope"])


@pytest.mark.parametrize(
    ("nvml_name", "expected"),
    [
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_nvml_names_map_to_profiles(nvml_name: str, expected: str | None) -> None:
    matched = ProfileRegistry().match_device(nvml_name, "gpu")
    assert (matched.name if matched else None) == expected


HOST = HostFacts(
    cpu_model="Example CPU 9000",
    cores=8,
    logical_cpus=16,
    clock_ghz=2.5,
    simd_bits=512,
    flags=frozenset({"avx512f"}),
    last_level_cache_bytes=32 * 2**20,
)


def test_cpu_profile_estimates_peaks_and_leaves_bandwidth_out() -> None:
    profile = cpu_profile(HOST)
    # 8 cores x 2.5 GHz x 16 fp32 lanes x 2 (FMA) x 2 FMA units = 1280 GFLOP/s
    assert profile.figure("compute.fp32_tflops") == pytest.approx(1.28)
    assert profile.figure("compute.fp64_tflops") == pytest.approx(0.64)
    assert profile.is_estimated("compute.fp32_tflops")
    assert profile.figure("memory.bandwidth_gbs") is None
    assert profile.figure("memory.last_level_cache_mib") == 32
    assert profile.name == "cpu-example-9000-8c"
    assert profile.labels["host.cpu_model"] == "Example CPU 9000"


def test_cpu_profile_takes_the_measured_copy_as_an_estimated_bandwidth() -> None:
    from perfsuite.hardware.bandwidth import Copy

    profile = cpu_profile(HOST, copy=Copy(21.5, "STREAM copy measured on this host: test"))
    assert profile.figure("memory.bandwidth_gbs") == 21.5
    assert profile.is_estimated("memory.bandwidth_gbs")
    assert profile.labels["memory.bandwidth_source"].endswith(": test")
    assert "STREAM copy measured on this host" in profile.source


@pytest.mark.parametrize(
    ("flags", "bf16", "fp16"),
    [
        (set(), 1.0, 1.0),  # widened to fp32 and computed there
        ({"avx512_bf16"}, 2.0, 1.0),  # AVX-512 BF16's dot product: twice fp32
        ({"avx512_bf16", "avx512_fp16"}, 2.0, 2.0),
        ({"amx_bf16", "avx512_bf16"}, 8 * 2.5 * 1024 / 1000, 1.0),  # AMX: 1024 FLOP/cycle
    ],
)
def test_16_bit_peaks_follow_what_the_cpu_can_do_with_16_bit_numbers(
    flags: set[str], bf16: float, fp16: float
) -> None:
    from perfsuite.hardware.detect import half_peaks

    peaks = half_peaks(frozenset(flags), fp32_tflops=1.0, cores=8, clock_ghz=2.5)
    assert peaks == {"bf16": pytest.approx(bf16), "fp16": pytest.approx(fp16)}
    profile = cpu_profile(HOST)
    assert profile.figure("compute.bf16_tflops") == profile.figure("compute.fp32_tflops")
    assert profile.is_estimated("compute.bf16_tflops")


def test_the_copy_arrays_are_past_the_cache_and_within_memory() -> None:
    from perfsuite.hardware.bandwidth import MIN_ELEMENTS, array_elements

    assert array_elements(32 * 2**20, 24 * 2**30) == 4 * 32 * 2**20 // 8
    assert array_elements(None, None) == MIN_ELEMENTS
    assert array_elements(480 * 2**20, 4 * 2**30) == 4 * 2**30 // 8 // 2 // 8


def test_cpu_profile_file_configures_bandwidth(tmp_path: Path) -> None:
    text = (
        'schema_version = 1\nname = "mycpu"\ndescription = "d"\nkind = "cpu"\nsource = "measured"\n'
        'match = ["Example CPU"]\n[memory]\nbandwidth_gbs = 200\n'
    )
    write(tmp_path, text, "mycpu")
    registry = ProfileRegistry([tmp_path])
    base = registry.match_device(HOST.cpu_model, "cpu")
    assert base is not None
    profile = cpu_profile(HOST, base=base)
    assert profile.name == "mycpu"
    assert profile.figure("memory.bandwidth_gbs") == 200
    assert not profile.is_estimated("memory.bandwidth_gbs")
    assert profile.is_estimated("compute.fp32_tflops")


def test_profile_round_trips_through_dict_and_toml(tmp_path: Path) -> None:
    profile = ProfileRegistry().load("h100-sxm")
    assert HardwareProfile.from_dict(profile.to_dict()) == profile
    path = tmp_path / "h100-sxm.toml"
    path.write_text(profile.to_toml())
    again = load_profile(path)
    assert again.figures == profile.figures and again.match == profile.match


def test_host_last_level_cache_is_read_from_sysfs() -> None:
    if not Path("/sys/devices/system/cpu/cpu0/cache").exists():
        pytest.skip("no sysfs cache information on this host")
    llc = last_level_cache_bytes()
    assert llc is not None and llc >= 256 * 1024


def test_a_cores_own_cache_is_read_per_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfsuite.hardware import detect

    caches = [
        (1, "Data", "48K"),
        (1, "Instruction", "32K"),
        (2, "Unified", "1024K"),
        (3, "Unified", "32768K"),
    ]
    for i, (level, kind, size) in enumerate(caches):
        index = tmp_path / "cpu0" / "cache" / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    monkeypatch.setattr(detect, "_SYSFS_CPU", tmp_path)
    assert detect.core_cache_bytes(1) == 48 * 1024
    assert detect.core_cache_bytes(2) == 2**20
    assert detect.core_cache_bytes(4) is None


def test_mi250x_is_described_per_gcd() -> None:
    """A package is two GCDs and ROCm shows each as a device: per-package floors never hold."""
    gcd = ProfileRegistry().load("mi250x")
    assert gcd.figure("memory.bandwidth_gbs") == 1600
    assert gcd.figure("compute.fp32_tflops") == pytest.approx(47.9 / 2)
    assert gcd.figure("compute.bf16_tflops") == pytest.approx(383 / 2)


def test_amd_gpus_are_found_in_the_kfd_topology(tmp_path: Path) -> None:
    from perfsuite.hardware.detect import amd_gpu_names

    for index, (simds, gfx) in enumerate([(0, ""), (220, "gfx90a"), (220, "gfx90a")]):
        node = tmp_path / str(index)
        node.mkdir()
        (node / "properties").write_text(f"cpu_cores_count 0\nsimd_count {simds}\n")
        (node / "name").write_text(gfx + "\n")
    names = amd_gpu_names(tmp_path)
    assert len(names) == 2  # two GCDs, the CPU node left out
    matched = ProfileRegistry().match_device(names[0], "gpu")
    assert matched is not None and matched.name == "mi250x"


ROCM_SMI = """#!/bin/sh
# rocm-smi --showproductname on a node with one MI250X package (two GCDs).
echo "============================ ROCm System Management Interface ============================"
echo "====================================== Product Info ======================================"
echo "GPU[0]		: Card series: 		AMD INSTINCT MI250X"
echo "GPU[0]		: Card model: 		0x740c"
echo "GPU[0]		: Card vendor: 		Advanced Micro Devices, Inc. [AMD/ATI]"
echo "GPU[1]		: Card series: 		AMD INSTINCT MI250X"
echo "GPU[1]		: Card model: 		0x740c"
echo "=========================================================================================="
"""


def test_amd_gpus_are_found_through_rocm_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``rocm-smi`` is installed, its product names come first, one per GCD."""
    from perfsuite.hardware.detect import amd_gpu_names

    tool = tmp_path / "bin" / "rocm-smi"
    tool.parent.mkdir()
    tool.write_text(ROCM_SMI)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    names = amd_gpu_names(tmp_path / "no-kfd")
    assert names == ("AMD INSTINCT MI250X", "AMD INSTINCT MI250X")
    matched = ProfileRegistry().match_device(names[0], "gpu")
    assert matched is not None and matched.name == "mi250x"


def test_the_precision_table_says_what_each_gpu_needs_and_writes() -> None:
    """Compute capabilities and GEMM outputs come from the one precision table."""
    from perfsuite.backends import PRECISION, output_precision
    from perfsuite.backends.base import gpu_precision_reason

    assert output_precision("fp8").name == "bf16" and output_precision("fp16").name == "fp16"
    v100, a100, h100 = (7, 0), (8, 0), (9, 0)
    assert gpu_precision_reason("gpu:1", v100, "bf16") == (
        "gpu:1 (compute capability 7.0) has no bf16; it needs 8.0+"
    )
    assert gpu_precision_reason("gpu:0", a100, "fp8") is not None
    assert gpu_precision_reason("gpu:0", h100, "fp8") is None
    assert all(gpu_precision_reason("gpu:0", v100, p) is None for p in ("fp32", "fp16"))
    assert PRECISION["fp64"].itemsize == 8  # STREAM's word


def test_a_cpu_only_tensorflow_on_a_gpu_machine_is_a_loud_skip() -> None:
    from perfsuite.backends.tensorflow import gpu_blind_reason
    from perfsuite.errors import loud_skip

    reason = gpu_blind_reason("gpu:0", 0, cuda_build=False, visible=8)
    assert "8 GPU(s) are visible" in reason and "perfsuite[tensorflow-gpu]" in reason
    assert "WARNING" not in gpu_blind_reason("gpu:0", 0, cuda_build=False, visible=0)
    # A CUDA build that finds fewer GPUs than the machine shows (a driver mismatch) is loud too.
    cuda = gpu_blind_reason("gpu:2", 2, cuda_build=True, visible=8)
    assert "WARNING: 8 GPU(s) are visible" in cuda and "finds 2" in cuda
    assert "WARNING" not in gpu_blind_reason("gpu:2", 2, cuda_build=True, visible=2)
    # The session's terminal lifts the warning out of the skip reason (see test_plugin).
    assert loud_skip(reason) is not None and loud_skip(reason).startswith("8 GPU(s) are visible")
    assert loud_skip(gpu_blind_reason("gpu:0", 0, cuda_build=False, visible=0)) is None


def test_a_corrupt_or_loaded_copy_figure_is_measured_again_and_never_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfsuite.hardware import bandwidth

    monkeypatch.setattr(bandwidth.tempfile, "gettempdir", lambda: str(tmp_path))
    kept = bandwidth._kept_at(32 << 20, bandwidth._threads())
    kept.parent.mkdir(parents=True)
    kept.write_text("{not json")
    measured = [bandwidth.Copy(9.0, "loaded", 1.0, loaded=True), bandwidth.Copy(20.0, "quiet")]
    monkeypatch.setattr(bandwidth, "measure_copy", lambda llc: measured.pop(0))
    first = bandwidth.measured_copy.__wrapped__(32 << 20)
    assert first is not None and first.gbs == 9.0
    assert kept.read_text() == "{not json"  # a figure measured under load is not kept
    second = bandwidth.measured_copy.__wrapped__(32 << 20)
    assert second is not None and second.gbs == 20.0
    assert json.loads(kept.read_text())["gbs"] == 20.0
    third = bandwidth.measured_copy.__wrapped__(32 << 20)  # now read back, not measured
    assert third == bandwidth.Copy(20.0, "quiet")


def test_a_pass_the_process_spent_stopped_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cgroup quota or a stopped process slows the wall clock, not the CPU clock."""
    from perfsuite.hardware import bandwidth

    wall, cpu = [0.0], [0.0]
    # (wall seconds, CPU seconds over both threads) of each pass: the third ran throughout.
    passes = iter([(1.0, 0.1), (1.0, 0.2), (0.2, 0.4), (0.9, 0.3), (1.0, 0.1)])

    def one() -> None:
        w, c = next(passes)
        wall[0] += w
        cpu[0] += c

    monkeypatch.setattr(bandwidth.time, "perf_counter", lambda: wall[0])
    monkeypatch.setattr(bandwidth.time, "process_time", lambda: cpu[0])
    walls, shares = bandwidth.timed_passes(one, allowed=2)
    assert walls == pytest.approx([1.0, 1.0, 0.2, 0.9, 1.0])
    assert shares == pytest.approx([0.05, 0.1, 1.0, 1 / 6, 0.05])
    # The fastest pass that ran counts; a faster one the process spent stopped would not.
    assert bandwidth.best_pass([0.5, 0.2, 0.3], [0.1, 0.9, 0.8]) == (0.2, False)
    assert bandwidth.best_pass([0.1, 0.2, 0.3], [0.1, 0.9, 0.8]) == (0.2, False)
    assert bandwidth.best_pass([1.0, 0.9], [0.1, 0.05]) == (0.9, True)


@pytest.mark.parametrize(
    ("files", "quota"),
    [
        ({"cpu.max": "50000 100000\n"}, 0.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_a_cgroup_cpu_quota_lowers_what_a_copy_pass_is_allowed(
    tmp_path: Path, files: dict[str, str], quota: float | None
) -> None:
    """A process held to half a CPU by its quota that uses it all ran throughout."""
    from perfsuite.hardware import bandwidth

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert bandwidth.cgroup_cpu_quota(tmp_path) == quota


def test_a_starved_copy_figure_is_used_but_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfsuite.hardware import bandwidth

    monkeypatch.setattr(bandwidth.tempfile, "gettempdir", lambda: str(tmp_path))
    kept = bandwidth._kept_at(32 << 20, bandwidth._threads())
    starved = bandwidth.Copy(0.4, "stopped", 0.0, starved=True)
    monkeypatch.setattr(bandwidth, "measure_copy", lambda llc: starved)
    assert bandwidth.measured_copy.__wrapped__(32 << 20) == starved
    assert not kept.exists()
