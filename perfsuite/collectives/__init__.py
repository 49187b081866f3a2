"""Collectives across real processes: the rank-side worker, its launcher, and the alpha-beta model.

The pytest process never becomes a rank.  A check starts :mod:`perfsuite.collectives.worker`
through a launcher (``mpiexec -n N`` by default, or ``srun``), the ranks measure, and rank 0
prints the samples as JSON lines that the plugin judges like any other samples.
"""

# The collective libraries ranks can be launched with: the module each needs, and how to
# install it.  The allreduce check parametrizes over them; ``--perf-backend`` accepts them.
LIBRARIES = {
    "mpi": ("mpi4py", "pip install 'perfsuite[mpi]'"),
    "torch": ("torch", "pip install 'perfsuite[torch]'"),
    "tensorflow": ("tensorflow", "pip install 'perfsuite[tensorflow]'"),
    "horovod": (
        "horovod",
        "build it from its sdist with scripts/horovod-build, or tox -e horovod "
        "(docs/checks/allreduce.md)",
    ),
}
# Libraries whose CPU collectives go over TCP sockets by design (gloo; TF's gRPC ring).
SOCKET_LIBRARIES = frozenset({"torch", "tensorflow"})
