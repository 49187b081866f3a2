"""Horovod on the ranks: its allreduce for the sweep and its training step for the POP check.

No Horovod release on the package index installs as a wheel, and its newest sdist (0.28.1)
builds its torch extension with C++14, which torch >= 2.1 headers refuse:
``scripts/horovod-build`` builds it from that sdist (raising the C++ standard to 17 for
torch), and ``tox -e horovod`` makes the environment.  :func:`extensions` tells, from the
installed package's files alone (no framework import), which framework extensions the
build has; the plugin's process calls it to skip with a reason.  Everything else here runs
on the ranks, started by the check's launcher (``mpiexec -n N`` by default).

**How the ranks meet.**  Under ``horovodrun`` (``HOROVOD_RANK`` set) Horovod's own
environment is used as it is.  A build with MPI under an MPI launcher uses MPI.  Otherwise
(a Gloo-only build, the one ``scripts/horovod-build`` makes by default) the ranks take rank
and size from the launcher, as the torch worker does, and rank 0 serves Horovod's Gloo
rendezvous (its own HTTP rendezvous server, what ``horovodrun --gloo`` starts) on
``MASTER_PORT`` of ``127.0.0.1``: ranks on one host, which is what a local ``mpiexec``
starts.  ``HOROVOD_CONTROLLER`` and ``HOROVOD_CPU_OPERATIONS`` are ``gloo`` then.

**Allreduce.**  The communicator is ``horovod.torch`` when that extension is built, and
``horovod.tensorflow`` otherwise (``PERFSUITE_HOROVOD_FRAMEWORK`` chooses).  On torch an
allreduce is submitted as training submits gradients (``allreduce_async_``, in place) and
waited for when its buffer is used again or at ``sync()``: back-to-back allreduces of one
buffer are one at a time, as the other backends' are, while K allreduces of K buffers
(the fusion experiment) are in flight together, so Horovod's background thread can fuse
them into one buffer per cycle: tensor fusion, switched off by ``HOROVOD_FUSION_THRESHOLD=0``.

**Training step.**  :class:`HorovodTrainer` trains the POP check's CNN with
``horovod.torch``: the local backward pass, then every gradient submitted with
``allreduce_async_`` (average) and all of them waited for, which is what
``hvd.DistributedOptimizer`` does after ``backward()`` and what tensor fusion packs into
one allreduce.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite.collectives.train import TorchTrainer
from perfsuite.collectives.worker import _env_int, _TorchTensors

BUILD_HINT = (
    "build it from the sdist with scripts/horovod-build, or tox -e horovod "
    "(no Horovod release on the package index builds unpatched against torch >= 2.1)"
)
# The compiled extension of each framework, relative to the horovod package.
EXTENSION_FILES = {"torch": "torch/mpi_lib_v2*.so", "tensorflow": "tensorflow/mpi_lib*.so"}
RENDEZVOUS_WAIT_S = 60.0


def extensions() -> tuple[str, ...]:
    """The frameworks the installed Horovod has extensions for, from its files; () if none."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return ()
    root = Path(next(iter(spec.submodule_search_locations)))
    return tuple(f for f, pattern in EXTENSION_FILES.items() if any(root.glob(pattern)))


def unavailable_reason(need_torch: bool = False) -> str | None:
    """Why Horovod cannot run here (not installed, or built without a usable framework)."""
    if importlib.util.find_spec("horovod") is None:
        return f"horovod is not installed; {BUILD_HINT}"
    built = extensions()
    for framework in ("torch", "tensorflow")[: 1 if need_torch else 2]:
        if framework in built and importlib.util.find_spec(framework) is not None:
            return None
    wanted = "torch" if need_torch else "torch or tensorflow"
    has = ", ".join(built) or "none"
    return f"horovod is installed without a {wanted} extension (built: {has}); {BUILD_HINT}"


def framework() -> str:
    """``torch`` or ``tensorflow``: ``PERFSUITE_HOROVOD_FRAMEWORK``, else torch when built."""
    chosen = os.environ.get("PERFSUITE_HOROVOD_FRAMEWORK", "")
    if chosen:
        if chosen not in EXTENSION_FILES:
            raise SystemExit(f"horovod worker: PERFSUITE_HOROVOD_FRAMEWORK={chosen!r} is unknown")
        return chosen
    built = extensions()
    if not built:
        raise SystemExit(f"horovod worker: no framework extension is built; {BUILD_HINT}")
    return "torch" if "torch" in built else built[0]


def _under_mpi_launcher() -> bool:
    return any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))


def gloo_rendezvous(mpi_built: bool) -> Any:
    """Set Horovod's Gloo environment from the launcher's; rank 0 returns the server it runs.

    Nothing to do (None) under ``horovodrun`` or for an MPI build under an MPI launcher.
    """
    if "HOROVOD_RANK" in os.environ or (mpi_built and _under_mpi_launcher()):
        return None
    rank = _env_int("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
    size = _env_int("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
    port = _env_int("MASTER_PORT")
    if rank is None or size is None or port is None:
        raise SystemExit("horovod worker: needs a launcher's rank and size, and MASTER_PORT")
    os.environ.update(
        {
            "HOROVOD_RANK": str(rank),
            "HOROVOD_SIZE": str(size),
            "HOROVOD_LOCAL_RANK": str(rank),
            "HOROVOD_LOCAL_SIZE": str(size),
            "HOROVOD_CROSS_RANK": "0",
            "HOROVOD_CROSS_SIZE": "1",
            "HOROVOD_HOSTNAME": "localhost",
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
            "HOROVOD_GLOO_IFACE": "lo",
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
        }
    )
    if rank == 0:
        return _serve_rendezvous(port, size)
    _wait_for_port(port)
    return None


def _serve_rendezvous(port: int, size: int) -> Any:
    """Horovod's Gloo rendezvous server (as ``horovodrun --gloo`` runs it), on ``port``."""
    import threading

    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    server = RendezvousHTTPServer(("127.0.0.1", port), RendezvousHandler, False)
    server.init(get_host_assignments(parse_hosts(f"localhost:{size}"), size))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + RENDEZVOUS_WAIT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"horovod worker: rank 0's rendezvous on port {port} did not answer "
                    f"in {RENDEZVOUS_WAIT_S:g} s"
                ) from None
            time.sleep(0.05)


def init_horovod(hvd: Any) -> Any:
    """``hvd.init()`` after the rendezvous; returns the server rank 0 runs (or None)."""
    server = gloo_rendezvous(bool(hvd.mpi_built()))
    hvd.init()
    return server


def _facts(hvd: Any, module: str) -> dict[str, Any]:
    controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "?"
    return {
        "library": module,
        "horovod": __import__("horovod").__version__,
        "controller": controller,
        "fusion_threshold": os.environ.get("HOROVOD_FUSION_THRESHOLD", "default"),
    }


class _HorovodGroup:
    """What every Horovod rank here shares: small objects gathered and sent, the end."""

    hvd: Any
    rank: int
    size: int
    server: Any
    torch: Any
    device: str

    def join_torch(self, device: str, threads: int = 0) -> None:
        """``horovod.torch`` started; rank, size, and the device (the local rank's GPU)."""
        import horovod.torch as hvd
        import torch

        self.hvd, self.torch = hvd, torch
        if threads > 0:
            torch.set_num_threads(threads)
        self.server = init_horovod(hvd)
        self.rank, self.size = int(hvd.rank()), int(hvd.size())
        if device == "gpu":
            torch.cuda.set_device(int(hvd.local_rank()) % torch.cuda.device_count())
            self.device = f"cuda:{torch.cuda.current_device()}"
        else:
            self.device = "cpu"

    def gather(self, value: Any) -> list[Any] | None:
        out = list(self.hvd.allgather_object(value))
        return out if self.rank == 0 else None

    def bcast(self, value: Any) -> Any:
        return self.hvd.broadcast_object(value, root_rank=0)

    def shutdown(self) -> None:
        """Horovod's end on this rank, then rank 0's rendezvous server."""
        self.hvd.shutdown()
        if self.server is not None:
            self.server.shutdown()


class HorovodComm(_HorovodGroup, _TorchTensors):
    """Horovod's allreduce on torch tensors, submitted asynchronously as training does."""

    name = "horovod"

    def __init__(self, device: str) -> None:
        self.join_torch(device)
        self.pending: dict[int, int] = {}  # id(recv) -> Horovod handle
        # One name per live buffer, the same on every rank, as training names each
        # gradient (Horovod's response cache then knows the tensor from its second
        # allreduce on).  Every rank makes its buffers in the same order, so a counter
        # numbers them alike; a buffer's name goes with it, so that a new buffer at the
        # same address (CPython reuses ids on one rank and not on another) gets a new one:
        # ranks that name one tensor differently wait for each other for ever.
        self.names: dict[int, str] = {}
        self.buffers = 0

    def _name(self, recv: Any) -> str:
        key = id(recv)
        if key not in self.names:
            self.names[key] = f"perfsuite.buffer{self.buffers}"
            self.buffers += 1
            weakref.finalize(recv, self.names.pop, key, None)
        return self.names[key]

    def allreduce(self, send: Any, recv: Any) -> None:
        handle = self.pending.pop(id(recv), None)
        if handle is not None:
            self.hvd.synchronize(handle)  # the buffer's previous allreduce, before reuse
        name = self._name(recv)
        recv.copy_(send)
        self.pending[id(recv)] = self.hvd.allreduce_async_(recv, op=self.hvd.Sum, name=name)

    def sync(self) -> None:
        for handle in self.pending.values():
            self.hvd.synchronize(handle)
        self.pending.clear()
        super().sync()

    def barrier(self) -> None:
        self.sync()
        self.hvd.barrier()

    def describe(self) -> dict[str, Any]:
        return _facts(self.hvd, "horovod.torch")

    def close(self) -> None:
        self.sync()
        self.shutdown()


class HorovodTensorFlowComm(_HorovodGroup):
    """Horovod's allreduce on TensorFlow tensors (eager; each call waits for its result)."""

    name = "horovod"

    def __init__(self, device: str) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if device == "cpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import horovod.tensorflow as hvd
        import tensorflow as tf

        self.hvd, self.tf = hvd, tf
        self.server = init_horovod(hvd)
        self.rank, self.size = int(hvd.rank()), int(hvd.size())
        self.device = device

    def buffer(self, values: np.ndarray) -> Any:
        return self.tf.constant(values)

    def empty(self, elements: int) -> Any:
        return [None]  # TensorFlow tensors are immutable: the result replaces the holder

    def allreduce(self, send: Any, recv: Any) -> None:
        recv[0] = self.hvd.allreduce(send, op=self.hvd.Sum)

    def barrier(self) -> None:
        """A one-element allreduce (``horovod.tensorflow`` has no barrier)."""
        self.hvd.allreduce(self.tf.zeros([1]), op=self.hvd.Sum, name="perfsuite.barrier")

    def sync(self) -> None:
        """Eager Horovod ops return when their result is ready."""

    def host(self, buf: Any) -> np.ndarray:
        return np.asarray(buf[0].numpy())

    def describe(self) -> dict[str, Any]:
        return _facts(self.hvd, "horovod.tensorflow")

    def close(self) -> None:
        self.shutdown()


def horovod_comm(device: str) -> Any:
    """The worker's ``horovod`` backend: on torch when that extension is built."""
    if framework() == "torch":
        return HorovodComm(device)
    return HorovodTensorFlowComm(device)


class HorovodTrainer(_HorovodGroup, TorchTrainer):
    """The POP check's CNN on ``horovod.torch``: the gradients allreduced as Horovod does.

    The phases are :class:`~perfsuite.collectives.train.TorchTrainer`'s; only the group and
    the communication differ: after the local backward pass every gradient is submitted
    with ``allreduce_async_`` (average, in place) and all are waited for, as
    ``hvd.DistributedOptimizer`` does, so Horovod fuses them (``HOROVOD_FUSION_THRESHOLD``).
    """

    name = "horovod"

    def __init__(self, device: str, batch: int, threads: int, seed: int) -> None:
        self.join_torch(device, threads)
        self.backend = "gloo" if self.hvd.gloo_enabled() else "mpi"
        self.setup_model(batch, seed)

    def forward_backward(self, passes: int) -> None:
        """Forward, loss, backward: local gradients (Horovod talks only when asked)."""
        self.optimizer.zero_grad(set_to_none=False)
        for _ in range(passes):
            self.loss(self.model(self.x), self.y).backward()

    def wait_for_all(self) -> None:
        """Return when every rank has arrived, polling the token's allreduce on the CPU."""
        handle = self.hvd.allreduce_async_(self.token, op=self.hvd.Sum, name="perfsuite.token")
        if self.device == "cpu":
            while not self.hvd.poll(handle):
                os.sched_yield()  # polling, but Horovod's background thread goes first
        self.hvd.synchronize(handle)
        self.sync()

    def allreduce_gradients(self) -> None:
        """Every gradient averaged in place, all in flight together (tensor fusion)."""
        handles = []
        for i, p in enumerate(self.params):
            assert p.grad is not None
            handles.append(self.hvd.allreduce_async_(p.grad, op=self.hvd.Average, name=f"g{i}"))
        for handle in handles:
            self.hvd.synchronize(handle)
        self.sync()

    def describe(self) -> dict[str, Any]:
        return {
            **_facts(self.hvd, "horovod.torch (allreduce_async_ per gradient, fused)"),
            "torch": self.torch.__version__,
            "threads_per_rank": self.torch.get_num_threads(),
        }

    def close(self) -> None:
        self.hvd.barrier()
        self.shutdown()
