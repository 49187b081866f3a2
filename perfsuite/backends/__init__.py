"""Framework backends, one module each, and the registry the checks look them up in.

A backend says which devices it has, how to synchronise them, how to allocate its buffers
on each, which timer to use, and implements each check's primitive operations.  Checks never
name a framework: they iterate :func:`targets`, so a new framework is one module here,
listed in :data:`BUILTIN` (or registered through the ``perfsuite.backends`` entry-point
group), with no edit to any check.  Backend modules import :mod:`.base` and
:mod:`.reference`, never this package's registry, so there is no import cycle; frameworks
are imported when a check runs.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from perfsuite.backends.base import (
    CONV_PASSES,
    PRECISION,
    PRECISIONS,
    Backend,
    ConvSpec,
    Kernel,
    Precision,
    StreamKernels,
    Target,
    gpu_slots,
    output_precision,
    precisions_for,
    slot_facts,
)

# name -> "module:class", imported on first use of the registry.
BUILTIN = {
    "numpy": "perfsuite.backends.numpy:NumpyBackend",
    "tensorflow": "perfsuite.backends.tensorflow:TensorFlowBackend",
    "torch": "perfsuite.backends.torch:TorchBackend",
}

__all__ = [
    "BUILTIN",
    "CONV_PASSES",
    "PRECISION",
    "PRECISIONS",
    "Backend",
    "ConvSpec",
    "Kernel",
    "Precision",
    "StreamKernels",
    "Target",
    "get",
    "gpu_slots",
    "output_precision",
    "precisions_for",
    "registry",
    "skip_reason",
    "slot_facts",
    "targets",
    "targets_for",
]


def _load(spec: str) -> Backend:
    module, _, cls = spec.partition(":")
    backend: Backend = getattr(importlib.import_module(module), cls)()
    return backend


@functools.cache
def registry() -> dict[str, Backend]:
    """Built-in backends, then any registered under the ``perfsuite.backends`` entry points."""
    backends = {name: _load(spec) for name, spec in BUILTIN.items()}
    for ep in entry_points(group="perfsuite.backends"):
        backend = ep.load()()
        backends[backend.name] = backend
    return backends


def get(name: str) -> Backend:
    """Look up a backend by name."""
    return registry()[name]


def targets() -> list[Target]:
    """Every (backend, device) pair a check is parametrized over."""
    return [Target(b.name, d) for b in registry().values() for d in b.device_slots()]


def skip_reason(target: Target, operation: str = "stream", precision: str = "fp32") -> str | None:
    """Why a target cannot run an operation in a precision here, or None when it can."""
    backend = get(target.backend)
    if operation not in backend.operations:
        return f"{backend.name} has no {operation}"
    return (
        backend.unavailable_reason()
        or backend.device_unavailable_reason(target.device)
        or backend.precision_unavailable_reason(target.device, precision)
    )


def targets_for(operation: str) -> list[Target]:
    """The targets whose backend implements ``operation``."""
    return [
        Target(b.name, d)
        for b in registry().values()
        if operation in b.operations
        for d in b.device_slots()
    ]
