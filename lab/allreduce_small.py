"""8-byte allreduce from Python against the C loop, under each MPI thread level.

Run under a launcher; the C reference is ``lab/allreduce_loop.c`` (``mpicc -O2``):

    mpiexec -n 2 python -m lab.allreduce_small --thread-level multiple
    mpiexec -n 2 python -m lab.allreduce_small --thread-level single
    mpicc -O2 -o /tmp/loop lab/allreduce_loop.c && mpiexec -n 2 /tmp/loop 2 200000

Each variant times ``--iterations`` back-to-back calls in one region, best of 5, after a
warm-up of the same length: the worker's own wrapper method, the bound ``Comm.Allreduce``,
and a persistent request (``Allreduce_init``, MPI-4).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thread-level", default="multiple",
                        choices=["single", "funneled", "serialized", "multiple"])  # fmt: skip
    parser.add_argument("--floats", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=100_000)
    args = parser.parse_args()
    import mpi4py

    mpi4py.rc.thread_level = args.thread_level  # mpi4py's default: multiple
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    send = np.arange(args.floats, dtype=np.float32)
    recv = np.empty_like(send)
    n = args.iterations

    class Wrapper:  # as perfsuite's worker calls it
        def __init__(self) -> None:
            self.comm, self.mpi = comm, MPI

        def allreduce(self, a: np.ndarray, b: np.ndarray) -> None:
            self.comm.Allreduce(a, b, op=self.mpi.SUM)

    wrapper = Wrapper()

    def wrapped() -> None:
        for _ in range(n):
            wrapper.allreduce(send, recv)

    def bound() -> None:
        call, op = comm.Allreduce, MPI.SUM
        for _ in range(n):
            call(send, recv, op)

    def persistent() -> None:
        request = comm.Allreduce_init(send, recv, MPI.SUM)
        for _ in range(n):
            request.Start()
            request.Wait()
        request.Free()

    variants: list[tuple[str, Callable[[], None]]] = [
        ("wrapper", wrapped), ("bound", bound), ("persistent", persistent)]  # fmt: skip
    for name, run in variants:
        run()
        best = float("inf")
        for _ in range(5):
            comm.Barrier()
            start = time.perf_counter()
            run()
            best = min(best, (time.perf_counter() - start) / n)
        if comm.rank == 0:
            print(f"{args.thread_level} {name} {4 * args.floats} B: {best * 1e6:.3f} us")


if __name__ == "__main__":
    main()
