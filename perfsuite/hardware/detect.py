"""Detection for ``--hw=auto``: NVML for GPUs, the host itself for a CPU profile.

The CPU profile's compute peaks are *estimates*:

    peak = cores x clock x (SIMD bits / element bits) x 2 (FMA) x FMA units per core

with two FMA units per core assumed (the common case on current x86 server cores and the
documented assumption here), for FP32 and FP64.  The 16-bit peaks follow from what the
CPU can do with 16-bit numbers (:func:`half_peaks`): twice the FP32 rate where it multiplies
them natively in its vector units (AVX-512 BF16's dot product, AVX-512 FP16), AMX's 1024
FLOP per cycle and core where it has tiles for them, and the FP32 rate otherwise (the
framework widens each 16-bit number to FP32 and computes there).

The memory bandwidth of a CPU is never guessed from its name: a CPU profile file may
configure it, and otherwise this host's copy rate is measured once per session (see
:mod:`perfsuite.hardware.bandwidth`) and is an estimate too.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from perfsuite.errors import ProfileError
from perfsuite.hardware.bandwidth import Copy, measured_copy
from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry

FMA_UNITS_PER_CORE = 2
# AMX's tile multiply: 1024 BF16 (or FP16) FLOP per cycle per core (Intel's figure).
AMX_FLOP_PER_CYCLE = 1024
_SYSFS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class HostFacts:
    """What the host says about its CPU."""

    cpu_model: str
    cores: int
    logical_cpus: int
    clock_ghz: float | None
    simd_bits: int
    flags: frozenset[str]
    last_level_cache_bytes: int | None


@dataclass(frozen=True)
class GpuFacts:
    """What NVML says about the visible GPUs, or why it could not say."""

    names: tuple[str, ...]
    reason: str = ""
    driver: str = "unknown"


def _simd_bits(flags: frozenset[str], machine: str) -> int:
    if "avx512f" in flags:
        return 512
    if "avx2" in flags or "avx" in flags:
        return 256
    if machine.lower() in ("aarch64", "arm64") or "asimd" in flags or "neon" in flags:
        return 128
    return 128 if "sse2" in flags else 64


def _sysfs_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not match:
        return 0
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2)]
    return int(match.group(1)) * scale


def _data_caches(cpus: str) -> Iterator[tuple[int, int, str | None]]:
    """(level, size in bytes, CPUs sharing it) of each data or unified cache sysfs lists.

    ``cpus`` is a glob of CPU folders (``cpu0``, ``cpu[0-9]*``); entries whose level, type or
    size cannot be read are skipped, and an unreadable list of sharing CPUs is None.
    """
    for index in sorted(_SYSFS_CPU.glob(f"{cpus}/cache/index[0-9]*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _sysfs_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        try:
            shared: str | None = (index / "shared_cpu_list").read_text().strip()
        except OSError:
            shared = None
        if kind != "Instruction" and size:
            yield level, size, shared


def last_level_cache_bytes() -> int | None:
    """Total size of the last-level cache over all its instances, from sysfs.

    Each distinct instance (identified by the CPUs that share it) is counted once, so a
    two-socket host reports both L3s.  Returns None where sysfs does not say.
    """
    best_level = -1
    instances: dict[str, int] = {}
    for level, size, shared in _data_caches("cpu[0-9]*"):
        if shared is None:
            continue
        if level > best_level:
            best_level, instances = level, {}
        if level == best_level:
            instances[shared] = size
    return sum(instances.values()) or None


def core_cache_bytes(level: int) -> int | None:
    """Size of one instance of the data (or unified) cache at ``level`` on the first CPU."""
    return next((size for lvl, size, _ in _data_caches("cpu0") if lvl == level), None)


@functools.cache
def host_facts() -> HostFacts:
    """Read the host's CPU facts once per process (sysfs first, py-cpuinfo and psutil after)."""
    import cpuinfo
    import psutil

    info = cpuinfo.get_cpu_info()
    flags = frozenset(info.get("flags", ()))
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    cores = psutil.cpu_count(logical=False) or logical
    freq = psutil.cpu_freq()
    clock_ghz: float | None = None
    if freq is not None and (freq.max or freq.current):
        clock_ghz = (freq.max or freq.current) / 1000.0
    elif info.get("hz_advertised"):
        clock_ghz = info["hz_advertised"][0] / 1e9
    llc = last_level_cache_bytes()
    if llc is None:
        # py-cpuinfo's figure can be a per-core slice on virtual machines; sysfs is preferred.
        llc = info.get("l3_cache_size") or info.get("l2_cache_size") or None
    model = info.get("brand_raw") or platform.processor() or platform.machine()
    return HostFacts(
        cpu_model=model,
        cores=int(cores),
        logical_cpus=int(logical),
        clock_ghz=clock_ghz,
        simd_bits=_simd_bits(flags, platform.machine()),
        flags=flags,
        last_level_cache_bytes=int(llc) if llc else None,
    )


KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
# Marketing names of the AMD targets perfsuite has profiles for (KFD knows only the gfx id).
AMD_TARGETS = {
    "gfx90a": "AMD Instinct MI250X/MI250/MI210 (gfx90a)",
    "gfx942": "AMD Instinct MI300 (gfx942)",
}


def amd_gpu_names(nodes: Path = KFD_NODES) -> tuple[str, ...]:
    """AMD GPUs as ROCm's kernel driver lists them: one name per device (per GCD).

    ``rocm-smi --showproductname`` is asked first where it is installed; otherwise each KFD
    topology node with SIMDs is a GPU, named by its gfx target.
    """
    names = _rocm_smi_names()
    if names:
        return names
    found = []
    for node in sorted(nodes.glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        try:
            props = dict(
                line.split(maxsplit=1)
                for line in (node / "properties").read_text().splitlines()
                if " " in line
            )
            gfx = (node / "name").read_text().strip()
        except OSError:
            continue
        if int(props.get("simd_count", "0") or 0) > 0:
            found.append(AMD_TARGETS.get(gfx, f"AMD GPU ({gfx or 'unknown'})"))
    return tuple(found)


def _rocm_smi_names() -> tuple[str, ...]:
    import shutil
    import subprocess

    smi = shutil.which("rocm-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run(
            [smi, "--showproductname"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(
        line.split(":", 2)[-1].strip() for line in out.splitlines() if "Card series" in line
    )


@functools.cache
def gpu_facts() -> GpuFacts:
    """The visible GPUs: NVIDIA through NVML, else AMD through ROCm; why none, if none."""
    nvidia = _nvidia_facts()
    if nvidia.names:
        return nvidia
    amd = amd_gpu_names()
    if amd:
        return GpuFacts(amd)
    return nvidia


def _nvidia_facts() -> GpuFacts:
    try:
        import pynvml
    except ImportError:
        return GpuFacts((), "nvidia-ml-py is not installed (pip install 'perfsuite[gpu]')")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuFacts((), f"NVML is not available: {exc}")
    try:
        count = pynvml.nvmlDeviceGetCount()
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        names = []
        for i in range(count):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else name)
    finally:
        pynvml.nvmlShutdown()
    return GpuFacts(tuple(names), "" if names else "NVML reports no GPU", driver)


def _slug(text: str) -> str:
    text = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def half_peaks(
    flags: frozenset[str], fp32_tflops: float, cores: int, clock_ghz: float
) -> dict[str, float]:
    """The bf16 and fp16 peaks of a CPU from its flags, given its FP32 peak (TFLOP/s)."""
    amx = cores * clock_ghz * AMX_FLOP_PER_CYCLE / 1000.0
    peaks = {}
    for precision, tiles, vector in (
        ("bf16", "amx_bf16", "avx512_bf16"),
        ("fp16", "amx_fp16", "avx512_fp16"),
    ):
        if tiles in flags:
            peaks[precision] = max(amx, 2 * fp32_tflops)
        elif vector in flags:
            peaks[precision] = 2 * fp32_tflops
        else:
            peaks[precision] = fp32_tflops
    return peaks


def cpu_profile(
    host: HostFacts, base: HardwareProfile | None = None, copy: Copy | None = None
) -> HardwareProfile:
    """Build the profile of this host's CPU.

    ``base`` is a CPU profile file that matched this host: its figures (for example a
    configured memory bandwidth) win, and only missing figures are estimated.  ``copy``: the
    host's measured copy rate, the estimated bandwidth where no file configures one.
    """
    figures: dict[str, float] = dict(base.figures) if base else {}
    estimated = set(base.estimated) if base else set()
    if host.clock_ghz:
        for bits, key in ((32, "compute.fp32_tflops"), (64, "compute.fp64_tflops")):
            if key not in figures:
                lanes = host.simd_bits // bits
                flops_per_cycle = lanes * 2 * FMA_UNITS_PER_CORE
                figures[key] = host.cores * host.clock_ghz * flops_per_cycle / 1000.0
                estimated.add(key)
        fp32 = figures["compute.fp32_tflops"]
        for precision, peak in half_peaks(host.flags, fp32, host.cores, host.clock_ghz).items():
            key = f"compute.{precision}_tflops"
            if key not in figures:
                figures[key] = peak
                estimated.add(key)
    bandwidth = "memory.bandwidth_gbs"
    if copy is not None and bandwidth not in figures:
        figures[bandwidth] = copy.gbs
        estimated.add(bandwidth)
    if host.last_level_cache_bytes and "memory.last_level_cache_mib" not in figures:
        figures["memory.last_level_cache_mib"] = host.last_level_cache_bytes / 2**20
    labels = dict(base.labels) if base else {}
    labels.update({"host.cpu_model": host.cpu_model})
    if copy is not None and bandwidth in estimated:
        labels["memory.bandwidth_source"] = copy.how
    figures.update(
        {
            "host.cores": float(host.cores),
            "host.simd_bits": float(host.simd_bits),
            "host.fma_units_per_core": float(FMA_UNITS_PER_CORE),
        }
    )
    if host.clock_ghz:
        figures["host.clock_ghz"] = host.clock_ghz
    if base is not None:
        return HardwareProfile(
            name=base.name,
            description=base.description,
            kind="cpu",
            vendor=base.vendor,
            source=base.source + "; compute peaks not given there are estimated from the host",
            match=base.match,
            figures=figures,
            labels=labels,
            estimated=frozenset(estimated),
            origin=base.origin,
        )
    return HardwareProfile(
        name=f"cpu-{_slug(host.cpu_model)}-{host.cores}c",
        description=f"{host.cpu_model}, {host.cores} cores, {host.simd_bits}-bit SIMD (detected)",
        kind="cpu",
        source=(
            "detected from this host: peaks estimated as cores x clock x SIMD lanes x 2 (FMA) "
            f"x {FMA_UNITS_PER_CORE} FMA units per core; "
            + (copy.how if copy is not None else "memory bandwidth not measured")
        ),
        figures=figures,
        labels=labels,
        estimated=frozenset(estimated),
        origin="detected",
    )


def resolve(hw: str, registry: ProfileRegistry) -> HardwareProfile:
    """Turn ``--hw`` into a profile: a name from the registry, or ``auto`` detection.

    The name ``auto`` gives this host's CPU (the name every record of it carries, such as
    ``cpu-amd-epyc-2c``) is accepted too, in any case, unless a registry profile has it.
    """
    if hw.lower() != "auto":
        if hw.lower() not in {n.lower() for n in registry.names()}:
            here = _host_profile(registry)
            if hw.lower() == here.name.lower():
                return here
        profile = registry.load(hw)
        if profile.kind == "cpu":
            return _with_copy(host_facts(), profile)
        return profile
    gpus = gpu_facts()
    if gpus.names:
        first = gpus.names[0]
        matched = registry.match_device(first, "gpu")
        if matched is None:
            raise ProfileError(
                f"--hw=auto: no profile matches GPU {first!r}; pass --hw=NAME "
                f"(known: {', '.join(registry.names())}) or add a profile whose 'match' "
                "contains part of that name"
            )
        return matched
    return _host_profile(registry)


def _host_profile(registry: ProfileRegistry) -> HardwareProfile:
    """The host CPU's profile, built on the registry's profile for its model if one matches."""
    host = host_facts()
    return _with_copy(host, registry.match_device(host.cpu_model, "cpu"))


def _with_copy(host: HostFacts, base: HardwareProfile | None) -> HardwareProfile:
    """The CPU profile, its bandwidth measured where ``base`` does not configure one."""
    configured = base is not None and base.figure("memory.bandwidth_gbs") is not None
    copy = None if configured else measured_copy(host.last_level_cache_bytes)
    return cpu_profile(host, base=base, copy=copy)
