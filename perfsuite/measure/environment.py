"""The environment fingerprint stored with every run and diffed between runs.

Heavy libraries are described as *loaded* (read from the imported module, so the version
that actually ran) or as *installed* (package metadata only) when the process never
imported them.  Nothing here imports TensorFlow, MPI or NVML just to describe them.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from perfsuite import __version__
from perfsuite.measure import allocator
from perfsuite.measure.redaction import (
    redact,
)

# Variables that change performance, by exact name or by a prefix that only performance
# settings use.  TensorFlow's are listed by name: ``TF_*`` also matches Terraform's
# ``TF_VAR_*`` and ``TF_CLI_*`` (where passwords and tokens live).
PERFORMANCE_VARIABLES = frozenset(
    {
        "TF_CPP_MIN_LOG_LEVEL",
        "TF_ENABLE_ONEDNN_OPTS",
        "TF_XLA_FLAGS",
        "TF_GPU_ALLOCATOR",
        "TF_CPU_ALLOCATOR_USE_BFC",
        "TF_GPU_THREAD_MODE",
        "TF_GPU_THREAD_COUNT",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "TF_CUDNN_DETERMINISTIC",
        "TF_DETERMINISTIC_OPS",
        "TF_CUDNN_USE_AUTOTUNE",
        "TF_ENABLE_AUTO_MIXED_PRECISION",
        "TF_INTRA_OP_PARALLELISM_THREADS",
        "TF_INTER_OP_PARALLELISM_THREADS",
        "TF_NUM_INTEROP_THREADS",
        "TF_NUM_INTRAOP_THREADS",
        "TF_USE_LEGACY_KERAS",
        "TF_CONFIG",
        "XLA_FLAGS",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_MODULE_LOADING",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "ONEDNN_VERBOSE",
        "DNNL_MAX_CPU_ISA",
        "ONEDNN_MAX_CPU_ISA",
        "PYTORCH_CUDA_ALLOC_CONF",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "MALLOC_ARENA_MAX",
    }
)
PERFORMANCE_PREFIXES = ("NCCL_", "OMP_", "KMP_", "MPICH_", "OMPI_MCA_", "UCX_", "I_MPI_")
# Module name -> distribution names that may provide it.
_LIBRARIES = {
    "numpy": ("numpy",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
    "torch": ("torch",),
    "mpi4py": ("mpi4py",),
    "pytest": ("pytest",),
    "pytest_benchmark": ("pytest-benchmark",),
    "xdist": ("pytest-xdist",),
}


def _installed(dists: tuple[str, ...]) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _library(module: str, dists: tuple[str, ...]) -> dict[str, Any]:
    mod = sys.modules.get(module)
    if mod is not None:
        entry: dict[str, Any] = {"version": getattr(mod, "__version__", None), "loaded": True}
        entry.update(_extra_facts(module, mod))
        return entry
    return {"version": _installed(dists), "loaded": False}


def _extra_facts(module: str, mod: Any) -> dict[str, Any]:
    """Build details that only a loaded module can tell."""
    try:
        if module == "tensorflow":
            info = dict(mod.sysconfig.get_build_info())
            return {
                "cuda_build": info.get("cuda_version"),
                "cudnn_build": info.get("cudnn_version"),
                "is_cuda_build": info.get("is_cuda_build"),
            }
        if module == "torch":
            nccl = mod.cuda.nccl.version() if mod.cuda.is_available() else None
            return {
                "cuda_build": mod.version.cuda,
                "cudnn_build": mod.backends.cudnn.version() if mod.version.cuda else None,
                "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
            }
        if module == "mpi4py":
            from mpi4py import MPI

            return {"mpi_library": MPI.Get_library_version().strip().splitlines()[0]}
    except Exception as exc:  # the fingerprint must never break a run
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def governor() -> str | None:
    """The CPU frequency governor, where the kernel exposes one."""
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def _host() -> dict[str, Any]:
    import psutil

    from perfsuite.hardware.detect import host_facts

    facts = host_facts()
    freq = psutil.cpu_freq()
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "cpu_model": facts.cpu_model,
        "cores": facts.cores,
        "logical_cpus": facts.logical_cpus,
        "simd_bits": facts.simd_bits,
        "last_level_cache_bytes": facts.last_level_cache_bytes,
        "governor": governor(),
        "cpu_mhz": round(freq.current, 1) if freq else None,
        "memory_bytes": psutil.virtual_memory().total,
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "malloc": allocator.state(),
        "framework_allocators": allocator.framework_state(),
        **node_label(),
    }


# The name a fleet gives this run's node (``perfsuite fleet run`` sets it per task).
NODE_LABEL_ENV = "PERFSUITE_NODE_LABEL"


def node_label(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"node_label": ...}`` when the run is one task of a fleet, else nothing."""
    label = (os.environ if environ is None else environ).get(NODE_LABEL_ENV, "").strip()
    return {"node_label": label} if label else {}


def _nvml_facts(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Read one GPU's facts; a query the device does not support is noted, not fatal."""
    queries: dict[str, Callable[[], Any]] = {
        "name": lambda: pynvml.nvmlDeviceGetName(handle),
        "uuid": lambda: pynvml.nvmlDeviceGetUUID(handle),
        "serial": lambda: pynvml.nvmlDeviceGetSerial(handle),
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "throttle_reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, 0),
        "ecc_mode": lambda: "on" if pynvml.nvmlDeviceGetEccMode(handle)[0] else "off",
        "pcie_generation": lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
        "pcie_width": lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
        "pcie_max_generation": lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
        "pcie_max_width": lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
        "mig_mode": lambda: "on" if pynvml.nvmlDeviceGetMigMode(handle)[0] else "off",
    }
    facts: dict[str, Any] = {}
    for key, query in queries.items():
        try:
            value = query()
            facts[key] = value.decode() if isinstance(value, bytes) else value
        except pynvml.NVMLError as exc:
            facts[key] = f"unavailable: {exc}"
    return facts


def gpus() -> list[dict[str, Any]] | dict[str, str]:
    """NVML facts of every visible GPU, or why there are none."""
    try:
        import pynvml
    except ImportError:
        return {"unavailable": "nvidia-ml-py is not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"unavailable": f"NVML: {exc}"}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        try:
            version = pynvml.nvmlSystemGetCudaDriverVersion()
            cuda = f"{version // 1000}.{version % 1000 // 10}"
        except pynvml.NVMLError as exc:
            cuda = f"unavailable: {exc}"
        return [
            {
                "index": i,
                "driver": driver,
                "cuda_driver": cuda,
                **_nvml_facts(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i)),
            }
            for i in range(pynvml.nvmlDeviceGetCount())
        ]
    finally:
        pynvml.nvmlShutdown()


def performance_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables that change performance, secrets redacted."""
    environ = os.environ if environ is None else environ
    return {
        k: redact(k, v)
        for k, v in sorted(environ.items())
        if k in PERFORMANCE_VARIABLES or k.startswith(PERFORMANCE_PREFIXES)
    }


def software() -> dict[str, Any]:
    """Versions of the Python stack, loaded modules described from the module itself."""
    libs = {name: _library(name, dists) for name, dists in _LIBRARIES.items()}
    facts = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "perfsuite": __version__,
        **libs,
    }
    # Plain JSON types only: an xdist worker sends this to the controller, and execnet
    # refuses str subclasses such as torch's TorchVersion.
    plain: dict[str, Any] = json.loads(json.dumps(facts, default=str))
    return plain


def fingerprint(variables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole fingerprint: software, GPUs, host and performance-relevant variables.

    ``variables``: the performance variables as the session found them (read before any
    backend set its own defaults, so runs of different checks record the same ones); read
    now when not given.
    """
    return {
        "software": software(),
        "gpus": gpus(),
        "host": _host(),
        "variables": dict(variables) if variables is not None else performance_env(),
    }


def merge_software(base: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Prefer facts from a process that loaded a library (e.g. an xdist worker)."""
    merged = dict(base)
    for name, entry in other.items():
        if isinstance(entry, dict) and entry.get("loaded"):
            current = merged.get(name)
            if not (isinstance(current, dict) and current.get("loaded")):
                merged[name] = entry
    return merged
