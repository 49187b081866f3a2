"""The environment fingerprint stored with every run and diffed between runs.

Heavy libraries are described as *loaded* (read from the imported module, so the version
that actually ran) or as *installed* (package metadata only) when the process never
imported them.  Nothing here imports TensorFlow, MPI or NVML just to describe them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from perfsuite import __version__, allocator

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
# A name with one of these words is a secret whatever its prefix (NCCL_IB_..._KEY, say).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
REDACTED = "<redacted>"
# Secrets recognised by their form, wherever they appear in a value: a private key; the
# tokens of GitHub (classic and fine-grained), GitLab, Slack, Hugging Face, OpenAI-style APIs,
# Stripe and Google APIs; AWS access key ids; a JWT; a URL with a password (an empty user
# too, as in ``redis://:S@host``); a URL query parameter whose name holds token, secret,
# key, pass, auth or sig; an HTTP Authorization value (``Bearer``, ``Basic``, ``Token``);
# and ``password=`` style assignments, also at the end of a longer name
# (``client_secret=``, ``aws_secret_access_key=``, ``pwd=``).  A commit hash (40 hex digits)
# is none of these; a standalone AWS secret access key is matched apart (see
# :func:`_aws_secret`).
_SECRET_FORM = re.compile(
    r"(?i:-----BEGIN [A-Z ]*PRIVATE KEY-----)|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abpr]-"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bglpat-[A-Za-z0-9_-]{16,}"
    r"|\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,}|\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.|://[^/\s:@]*:[^/\s@]+@"
    r"|(?i:[?&][^=&\s#]*(?:token|secret|key|pass|auth|sig)[^=&\s#]*=[^&\s#])"
    r"|(?i:\bbearer[\s:=]+[A-Za-z0-9._~+/=-]{4,})|\bBasic\s+[A-Za-z0-9+/]{12,}"
    r"|\b[Tt]oken\s+(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:aws_secret)"
    r"|(?i:(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key)\s*[=:])"
)
# An AWS secret access key standing alone: 40 characters of base64, at least one of them '/'
# or '+' (so never a commit hash or another hex digest), mixing upper and lower case and digits.
_AWS_CANDIDATE = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _aws_secret(text: str) -> bool:
    """Whether ``text`` holds what can only be an AWS secret access key (see above)."""
    return any(
        re.search(r"[/+]", key)
        and re.search(r"[A-Z]", key)
        and re.search(r"[a-z]", key)
        and re.search(r"[0-9]", key)
        and not key.startswith("/")  # a path: /opt/... is a folder, not a key
        for key in _AWS_CANDIDATE.findall(text)
    )


def secret_form(text: str) -> bool:
    """Whether ``text`` holds a credential by its form (a token, a key, a password)."""
    return bool(_SECRET_FORM.search(text)) or _aws_secret(text)


# A flag that takes a credential: one part of its name (split at '_', '-', '.' and at a
# lower-to-upper case change) is one of these words, so --password, --passphrase, --api-key,
# --access-key, --clientSecret and --hf_token are, and --max_tokens, --passes, --keyfile not.
_SECRET_PART = re.compile(
    r"(?i)pass(?:word|wd|phrase|code)?|pwd|pw|secrets?|token|key|api[_-]?key|"
    r"credentials?|auth"
)
_FLAG = re.compile(r"(-{1,2})([A-Za-z][\w.-]*)(?:([=:])(.*))?", re.DOTALL)
_NAME_PARTS = re.compile(r"[_.-]+|(?<=[a-z0-9])(?=[A-Z])")

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


def secret_flag(word: str) -> bool:
    """Whether ``word`` is a flag that names a credential (``--access-key``, ``-token``)."""
    match = _FLAG.fullmatch(word)
    if match is None:
        return False
    parts = _NAME_PARTS.split(match.group(2))
    return any(_SECRET_PART.fullmatch(part) for part in parts if part)


def has_secret(text: str) -> bool:
    """Whether ``text`` holds a credential by its form, or a credential flag with a value.

    A flag counts with ``=`` or ``:`` and a value (``--clientSecret=X``), or followed by
    another word (``--passphrase X``).
    """
    if secret_form(text):
        return True
    words = text.split()
    for i, word in enumerate(words):
        match = _FLAG.fullmatch(word)
        if match is None or not secret_flag(word):
            continue
        if match.group(3) is not None or i + 1 < len(words):
            return True
    return False


def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable's name or value looks like a credential."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS) or has_secret(value)


def redact(name: str, value: str) -> str:
    """The value to record: the value itself, or a redaction mark for a secret."""
    return REDACTED if is_secret(name, value) else value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line to record: each credential replaced by the redaction mark.

    ``--key=X`` keeps its flag (``--key=<redacted>``); ``--key X`` keeps the flag and loses
    the next item unless that is another option; an item holding a credential by its form
    (``Bearer X``, ``hf_...``) is replaced whole, and so is an item that makes one with the
    item before it (``Bearer`` then ``X``, as a header split at its space gives).
    """
    out: list[str] = []
    hide_next = False
    for i, item in enumerate(argv):
        if hide_next and not item.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        match = _FLAG.fullmatch(item)
        if match is not None and secret_flag(item):
            if match.group(3) is not None:
                out.append(f"{match.group(1)}{match.group(2)}{match.group(3)}{REDACTED}")
            else:
                out.append(item)
                hide_next = True
            continue
        if secret_form(item):
            out.append(REDACTED)
        elif i and secret_form(f"{argv[i - 1]} {item}") and not secret_form(argv[i - 1]):
            out.append(REDACTED)  # the token of a pair: "Bearer" kept, what follows hidden
        else:
            out.append(item)
    return out


def redact_command(command: str) -> str:
    """A command given as one string (``--perf-launcher``) to record, credentials redacted.

    Split as a shell would, so a quoted ``-H 'Authorization: Bearer X'`` is one item, then
    redacted as :func:`redact_argv` does; a string with no credential is kept as written.
    One that does not split (an unclosed quote) is split at whitespace.
    """
    try:
        argv, split = shlex.split(command), True
    except ValueError:
        argv, split = command.split(), False
    redacted = redact_argv(argv)
    if redacted == argv:
        return command
    if not split:  # its quotes did not pair as written: kept as they were
        return " ".join(redacted)
    return " ".join(
        item if item == REDACTED or (item and not _NEEDS_QUOTES.search(item)) else shlex.quote(item)
        for item in redacted
    )


# Characters that make a recorded item ambiguous unless quoted (``{ranks}`` is kept bare).
_NEEDS_QUOTES = re.compile(r"[\s'\"\\$`;&|<>()*?!#]")


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
