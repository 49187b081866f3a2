"""The MPI collective timed in C inside a rank: the OSU method, behind mpi4py's communicator.

A Python loop around ``Comm.Allreduce`` costs about a microsecond a call on top of the
collective, as much as an 8 B allreduce between two ranks on one host: a regression of a
few hundred nanoseconds in the MPI library would disappear under it.  So the worker times
the collective with :file:`allreduce_loop.c`, built on first use with the MPI compiler
wrapper (``mpicc``, beside this Python or on ``PATH``; ``$PERFSUITE_MPICC`` names another)
and called through ctypes with mpi4py's own communicator and numpy buffers.  The library it
was built against must be the one mpi4py loaded, or the loop is not used.  Without a
wrapper, or on any failure, the caller is told why and times mpi4py's calls instead.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.measure import native

SOURCE = "allreduce_loop.c"


@dataclass(frozen=True)
class NativeLoop:
    """The loaded C loop, bound to one communicator."""

    function: Any  # ctypes function: (comm*, send*, recv*, count, iterations) -> seconds
    comm_address: int
    built_with: str

    def time(self, send: np.ndarray, recv: np.ndarray, iterations: int) -> float:
        """Seconds for ``iterations`` back-to-back allreduces of ``send`` into ``recv``."""
        seconds = float(
            self.function(
                ctypes.c_void_p(self.comm_address),
                send.ctypes.data_as(ctypes.c_void_p),
                recv.ctypes.data_as(ctypes.c_void_p),
                ctypes.c_int(send.size),
                ctypes.c_long(iterations),
            )
        )
        if seconds < 0:
            raise RuntimeError("MPI_Allreduce failed inside the C loop")
        return seconds


def mpi_compiler() -> str | None:
    """The MPI compiler wrapper: ``$PERFSUITE_MPICC``, else ``mpicc`` by this Python or on PATH."""
    named = os.environ.get("PERFSUITE_MPICC")
    if named:
        return shutil.which(named)
    beside = shutil.which("mpicc", path=str(Path(sys.executable).parent))
    return beside or shutil.which("mpicc")


def load(mpi: Any, comm: Any) -> tuple[NativeLoop | None, str]:
    """The C loop over ``comm`` (an mpi4py communicator), or None and why not."""
    compiler = mpi_compiler()
    if compiler is None:
        named = os.environ.get("PERFSUITE_MPICC")
        if named:
            return None, f"$PERFSUITE_MPICC ({named}) is not an MPI compiler wrapper found here"
        return None, "no MPI compiler wrapper (mpicc) beside this Python or on PATH"
    source = resources.files("perfsuite.collectives").joinpath(SOURCE).read_text()
    lib, how = native.build("allreduce_loop", source, ("-O2", "-shared", "-fPIC"), compiler)
    if lib is None:
        return None, how
    buffer = ctypes.create_string_buffer(4096)
    lib.perfsuite_mpi_library.argtypes = [ctypes.c_char_p, ctypes.c_int]
    if lib.perfsuite_mpi_library(buffer, len(buffer)) != 0:
        return None, "the C loop could not read its MPI library's version"
    theirs = buffer.value.decode(errors="replace").strip().splitlines()[:1]
    ours = mpi.Get_library_version().strip().splitlines()[:1]
    if theirs != ours:
        return None, f"{compiler} builds against {theirs} but mpi4py loaded {ours}"
    function = lib.perfsuite_allreduce_loop
    function.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_long
    ]  # fmt: skip
    function.restype = ctypes.c_double
    return NativeLoop(function, int(mpi._addressof(comm)), how), ""
