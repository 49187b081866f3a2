"""The C allocator's policy, pinned for the whole session.

Framework kernels on the CPU allocate their outputs and scratch buffers on every call:
TensorFlow's eager ops cannot write into a buffer they are given, and a convolution's
backward pass takes a large im2col buffer (38 MiB for a 128x128x64 input) each time.  glibc
serves a block above its *mmap threshold* with a fresh ``mmap``, which the kernel then
zero-fills page by page on first touch, on every call.  That threshold moves by itself: it
rises to the size of the largest mapped block freed so far (up to 32 MiB), so whether a
check pays those page faults depended on what had run before in the same process.  On a
2-core VM the TensorFlow conv backward passes of that layer took 17 and 25 ms per call in
some processes and 11 and 16 ms in others, a spread of up to 1.75x between fresh runs with
nothing changed, from this alone.

:func:`pin` sets the threshold once, at the start of the session, in every pytest process
(xdist workers included), so large temporaries are reused from the heap in every process
alike (``mallopt(M_MMAP_THRESHOLD)``, which also stops the threshold from moving).  The run
record keeps what was set (``environment.host.malloc``).  ``--perf-malloc-threshold 0``
leaves glibc's own policy.  Elsewhere (not glibc, not Linux) nothing is changed and the
record says so.

TensorFlow's CPU tensors do not come from that heap's free lists alike: its aligned requests
for a 128 MiB output often did not fit the 128 MiB block just freed, so glibc grew the heap
and the kernel zero-filled 32,768 fresh pages inside the timed call.  In one process an XLA
STREAM triad took 6 GB/s on about one call in eight, 15-20 GB/s on the rest, and the
slow calls were exactly those with 32,768 minor page faults.  :func:`pool_frameworks`
therefore asks TensorFlow for its own best-fit pool on the CPU
(``TF_CPU_ALLOCATOR_USE_BFC=true``, before TensorFlow is imported), which keeps freed buffers
for the next call: no page faults after the first call, as on a GPU.  A value the user set
is kept; the record says which (``environment.host.framework_allocators``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers
M_MMAP_THRESHOLD = -3
DEFAULT_MIB = 256
# mallopt takes a C int: the largest threshold it can be given, in bytes and in whole MiB.
C_INT_MAX = 2**31 - 1
MAX_MIB = C_INT_MAX // 2**20

_state: dict[str, Any] = {"pinned": False, "reason": "not set (glibc's own policy)"}
TF_BFC = "TF_CPU_ALLOCATOR_USE_BFC"
_frameworks: dict[str, Any] = {}


def pin(mib: int) -> dict[str, Any]:
    """Set glibc's mmap threshold to ``mib`` MiB (0: leave it); return what happened."""
    global _state
    if mib > MAX_MIB:
        raise ValueError(f"an mmap threshold of {mib} MiB does not fit mallopt's C int")
    if mib <= 0:
        _state = {"pinned": False, "reason": "--perf-malloc-threshold 0: glibc's own policy"}
        return dict(_state)
    mallopt = _mallopt()
    if mallopt is None:
        _state = {"pinned": False, "reason": "not glibc: the C allocator's policy is its own"}
        return dict(_state)
    value = mib * 2**20
    trim = min(2 * value, C_INT_MAX)  # what glibc is given, not what was asked
    if mallopt(M_MMAP_THRESHOLD, value) != 1 or mallopt(M_TRIM_THRESHOLD, trim) != 1:
        _state = {"pinned": False, "reason": f"glibc refused an mmap threshold of {mib} MiB"}
        return dict(_state)
    _state = {"pinned": True, "mmap_threshold_bytes": value, "trim_threshold_bytes": trim}
    return dict(_state)


def state() -> dict[str, Any]:
    """What :func:`pin` did in this process."""
    return dict(_state)


def pool_frameworks() -> dict[str, Any]:
    """Ask TensorFlow for its pooling allocator on the CPU, unless the user chose; say what.

    Only an environment variable, read when TensorFlow starts: set before any import of it.
    """
    global _frameworks
    user = os.environ.get(TF_BFC)
    if user is not None:
        how = f"{TF_BFC}={user}, as set in the environment"
    elif "tensorflow" in sys.modules:
        how = "TensorFlow was imported before the session started: its own default"
    else:
        os.environ[TF_BFC] = "true"
        how = f"{TF_BFC}=true (pooled: no fresh pages inside a timed call)"
    _frameworks = {"tensorflow_cpu": how}
    return dict(_frameworks)


def framework_state() -> dict[str, Any]:
    """What :func:`pool_frameworks` did in this process."""
    return dict(_frameworks)


def _mallopt() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        version = libc.gnu_get_libc_version  # glibc only
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt
