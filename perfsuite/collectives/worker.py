"""One rank of an allreduce sweep; run by a launcher, never imported by the plugin's process.

    mpiexec -n 2 python -m perfsuite.collectives.worker --backend mpi --sizes 8,65536

The OSU micro-benchmarks' method, per message size:

* every rank fills its buffer with integers in [0, 8) (the same random pattern on every
  rank, plus the rank number), so every element of the float32 sum is exact and checked;
* a barrier; warm-up iterations; then, per sample, a barrier and ``iterations`` timed
  allreduces back to back (more iterations for small messages: rank 0 sizes them from the
  warm-up so each sample lasts about ``--sample-seconds``, and broadcasts the count);
* each rank's time per allreduce is gathered on rank 0, which prints one JSON line per sample
  with the mean across ranks (``seconds``, the sample) and the maximum (``max_seconds``);
* the result of the last allreduce is verified on every rank; a wrong element ends the
  worker with a non-zero status and the element on stderr.

Then the fusion experiment: K small allreduces against one of the same total size.

Backends: ``mpi`` (mpi4py), ``torch`` (torch.distributed: gloo on the CPU, NCCL on GPUs),
``tensorflow`` (MultiWorkerMirroredStrategy, RING) and ``horovod`` (``horovod.torch``, or
``horovod.tensorflow`` where only that is built; see :mod:`perfsuite.collectives.horovod`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

SEED = 20261123
PATTERN_MAX = 8  # buffer values are integers below this, plus the rank


class VerificationError(RuntimeError):
    """An allreduce returned a wrong element."""


def pattern(elements: int) -> np.ndarray:
    """The random integer pattern every rank starts from (float32, exact)."""
    rng = np.random.default_rng(SEED)
    return rng.integers(0, PATTERN_MAX, elements).astype(np.float32)


def expected_sum(base: np.ndarray, ranks: int) -> np.ndarray:
    """The exact sum over ranks of ``base + rank``."""
    return base * ranks + np.float32(ranks * (ranks - 1) / 2)


def verify(result: np.ndarray, base: np.ndarray, ranks: int, size: int) -> None:
    """Every element must equal the exact sum; raise with the first wrong one otherwise."""
    expected = expected_sum(base, ranks)
    wrong = np.flatnonzero(result != expected)
    if wrong.size:
        i = int(wrong[0])
        raise VerificationError(
            f"allreduce of {size} B over {ranks} ranks is wrong at element {i}: got "
            f"{float(result[i])!r}, expected {float(expected[i])!r} ({wrong.size} wrong)"
        )


PAGE = 4096


def page_aligned(elements: int) -> np.ndarray:
    """A float32 buffer that starts on a page, as OSU's do.

    A large array from malloc starts 16 bytes past a page, and MPICH's shared-memory copy of
    such a buffer ran at half the rate (16 MiB busbw 1.6 against 3.1 GB/s on a 2-core VM):
    the figure would depend on where the allocator put the buffer, not on the library.
    """
    raw = np.empty(elements * 4 + PAGE, dtype=np.uint8)
    start = -raw.ctypes.data % PAGE
    return raw[start : start + elements * 4].view(np.float32)


class MpiComm:
    """mpi4py's COMM_WORLD, float32 sum."""

    name = "mpi"

    def __init__(self, device: str) -> None:
        import mpi4py

        if "MPI4PY_RC_THREAD_LEVEL" not in os.environ:
            # Only this thread calls MPI.  mpi4py asks for MPI_THREAD_MULTIPLE by default,
            # and MPICH then takes a global lock around every call: about 2.5 µs more per
            # 8 B allreduce on a 2-core VM, more than the collective itself.
            mpi4py.rc.thread_level = "funneled"
        from mpi4py import MPI

        from perfsuite.collectives import native_loop

        self.mpi = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.device = "cpu"
        self.native, why = native_loop.load(MPI, self.comm)
        # Every rank must time the same way, or their loops would not meet.
        ready = self.comm.allreduce(1 if self.native is not None else 0)
        if ready != self.size:
            self.native = None
            why = why or "another rank could not build the C loop"
        self.timer = (
            f"C loop in the rank over mpi4py's communicator ({self.native.built_with})"
            if self.native is not None
            else f"mpi4py loop ({why})"
        )

    def buffer(self, values: np.ndarray) -> Any:
        out = self.empty(values.size)
        out[:] = values
        return out

    def empty(self, elements: int) -> Any:
        return page_aligned(elements)

    def allreduce(self, send: Any, recv: Any) -> None:
        self.comm.Allreduce(send, recv, op=self.mpi.SUM)

    def timed(self, send: Any, recv: Any, iterations: int) -> float:
        """The collective: the C loop's seconds where it is built, else mpi4py's calls'."""
        if self.native is not None:
            return self.native.time(send, recv, iterations)
        return self.binding_timed(send, recv, iterations)

    def binding_timed(self, send: Any, recv: Any, iterations: int) -> float:
        """mpi4py's own calls (buffer interface on numpy arrays, no pickling), bound once."""
        call, op = self.comm.Allreduce, self.mpi.SUM
        start = time.perf_counter()
        for _ in range(iterations):
            call(send, recv, op)
        return time.perf_counter() - start

    def barrier(self) -> None:
        self.comm.Barrier()

    def sync(self) -> None:
        """MPI calls are blocking."""

    def host(self, buf: Any) -> np.ndarray:
        return np.asarray(buf)

    def gather(self, value: Any) -> list[Any] | None:
        return self.comm.gather(value, root=0)

    def bcast(self, value: Any) -> Any:
        return self.comm.bcast(value, root=0)

    def describe(self) -> dict[str, Any]:
        library = self.mpi.Get_library_version().strip().splitlines()[0]
        thread_level = {
            self.mpi.THREAD_SINGLE: "single",
            self.mpi.THREAD_FUNNELED: "funneled",
            self.mpi.THREAD_SERIALIZED: "serialized",
            self.mpi.THREAD_MULTIPLE: "multiple",
        }.get(self.mpi.Query_thread(), "unknown")
        return {
            "library": library,
            "mpi4py": __import__("mpi4py").__version__,
            "thread_level": thread_level,
            "timer": self.timer,
        }

    def close(self) -> None:
        """MPI finalizes at exit."""


def _env_int(*names: str) -> int | None:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def join_torch_group(device: str, who: str) -> tuple[int, int, str, str]:
    """Join torch.distributed's group, rank and size from the launcher's environment.

    gloo on the CPU, NCCL on the rank's GPU (the local rank's, modulo the GPUs visible).
    Returns ``(rank, size, torch device, backend)``.
    """
    import torch
    import torch.distributed as dist

    rank = _env_int("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
    size = _env_int("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
    if rank is None or size is None:
        raise SystemExit(f"{who}: no rank or size in the environment; use a launcher")
    local = _env_int("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        raise SystemExit(f"{who}: MASTER_PORT is not set")
    if device == "gpu":
        torch.cuda.set_device((local or 0) % torch.cuda.device_count())
        where, backend = f"cuda:{torch.cuda.current_device()}", "nccl"
    else:
        where, backend = "cpu", "gloo"
    dist.init_process_group(backend, rank=rank, world_size=size, init_method="env://")
    return rank, size, where, backend


class _TorchTensors:
    """Buffers as torch tensors on ``self.device`` (the CPU, or the rank's CUDA device)."""

    torch: Any
    device: str

    def buffer(self, values: np.ndarray) -> Any:
        return self.torch.from_numpy(values.copy()).to(self.device)

    def empty(self, elements: int) -> Any:
        return self.torch.empty(elements, dtype=self.torch.float32, device=self.device)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def host(self, buf: Any) -> np.ndarray:
        self.sync()
        return np.asarray(buf.cpu().numpy())


class TorchComm(_TorchTensors):
    """torch.distributed: gloo on the CPU, NCCL on a GPU; rank and size from the launcher."""

    name = "torch"

    def __init__(self, device: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.size, self.device, self.backend = join_torch_group(device, "torch worker")

    def allreduce(self, send: Any, recv: Any) -> None:
        # torch reduces in place: the send buffer is copied into recv first (counted in the
        # time, as a device-to-device copy of S bytes, small against the reduction).
        recv.copy_(send)
        self.dist.all_reduce(recv, op=self.dist.ReduceOp.SUM)

    def barrier(self) -> None:
        self.sync()
        self.dist.barrier()

    def gather(self, value: Any) -> list[Any] | None:
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, value)
        return out if self.rank == 0 else None

    def bcast(self, value: Any) -> Any:
        box = [value]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def describe(self) -> dict[str, Any]:
        facts = {"library": f"torch.distributed {self.backend}", "torch": self.torch.__version__}
        if self.backend == "nccl":
            nccl: Any = self.torch.cuda.nccl
            facts["nccl"] = ".".join(map(str, nccl.version()))
        return facts

    def close(self) -> None:
        self.dist.destroy_process_group()


class TensorFlowComm:
    """TensorFlow's own collectives: MultiWorkerMirroredStrategy, RING, one replica per rank.

    The cluster is ``TF_CONFIG`` when the environment has one; otherwise it is built from
    the launcher's rank and size and ``PERFSUITE_COLLECTIVE_PORTS`` (one free loopback port
    per rank, picked by the plugin), so every worker listens on 127.0.0.1 only.
    """

    name = "tensorflow"
    BLOB = 256  # bytes per rank for gathering small objects through a sum

    def __init__(self, device: str) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        rank = _env_int("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK")
        size = _env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE")
        if "TF_CONFIG" not in os.environ:
            ports = os.environ.get("PERFSUITE_COLLECTIVE_PORTS", "").split(",")
            if rank is None or size is None or len(ports) < size:
                raise SystemExit(
                    "tensorflow worker: needs TF_CONFIG, or a launcher's rank and size with "
                    "PERFSUITE_COLLECTIVE_PORTS"
                )
            os.environ["TF_CONFIG"] = json.dumps(
                {
                    "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports[:size]]},
                    "task": {"type": "worker", "index": rank},
                }
            )
        if device == "cpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import tensorflow as tf

        self.tf = tf
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        resolver = self.strategy.cluster_resolver
        self.rank = int(resolver.task_id)
        self.size = int(self.strategy.num_replicas_in_sync)
        self.device = device

        here = self.strategy.extended.worker_devices[0]
        extended = self.strategy.extended

        # A cross-replica reduce_to inside a tf.function: the graph path training uses.
        # (A replica-context all_reduce inside tf.function fails in TF 2.21 on the CPU with
        # "destinations can not be empty"; eager strategy.run works but is not the fast path.)
        def step(t: Any) -> Any:
            value = self.strategy.run(tf.identity, args=(t,))
            return extended.reduce_to(tf.distribute.ReduceOp.SUM, value, destinations=here)

        self._step = tf.function(step)

    def buffer(self, values: np.ndarray) -> Any:
        return self.tf.constant(values)

    def empty(self, elements: int) -> Any:
        return [None]  # TensorFlow tensors are immutable: the result replaces the holder

    def allreduce(self, send: Any, recv: Any) -> None:
        recv[0] = self._step(send)

    def barrier(self) -> None:
        self._step(self.tf.zeros([1], self.tf.float32)).numpy()

    def sync(self) -> None:
        """Results are read back with ``numpy()``; a barrier waits for the ring."""
        self.barrier()

    def host(self, buf: Any) -> np.ndarray:
        return np.asarray(buf[0].numpy())

    def _sum(self, matrix: np.ndarray) -> np.ndarray:
        return np.asarray(self._step(self.tf.constant(matrix)).numpy())

    def gather(self, value: Any) -> list[Any] | None:
        blob = json.dumps(value).encode()[: self.BLOB]
        rows = np.zeros((self.size, self.BLOB), dtype=np.float32)
        rows[self.rank, : len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        summed = self._sum(rows).astype(np.uint8)
        out = [json.loads(bytes(row).rstrip(b"\0")) for row in summed]
        return out if self.rank == 0 else None

    def bcast(self, value: Any) -> Any:
        rows = np.zeros((self.size, self.BLOB), dtype=np.float32)
        if self.rank == 0:
            blob = json.dumps(value).encode()[: self.BLOB]
            rows[0, : len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        summed = self._sum(rows).astype(np.uint8)
        return json.loads(bytes(summed[0]).rstrip(b"\0"))

    def describe(self) -> dict[str, Any]:
        return {
            "library": "tf.distribute MultiWorkerMirroredStrategy RING",
            "tensorflow": self.tf.__version__,
        }

    def close(self) -> None:
        """TensorFlow's collective executors end with the process."""


def horovod_comm(device: str) -> Any:
    """Horovod's communicator (:mod:`perfsuite.collectives.horovod`, imported on use)."""
    from perfsuite.collectives.horovod import horovod_comm

    return horovod_comm(device)


COMMS: dict[str, Any] = {
    "mpi": MpiComm,
    "torch": TorchComm,
    "tensorflow": TensorFlowComm,
    "horovod": horovod_comm,
}


def _loop(comm: Any, send: Any, recv: Any, iterations: int) -> float:
    """Seconds for ``iterations`` back-to-back allreduces, synchronised, in one region.

    A backend with a timer of its own (MPI's C loop) uses it; the others call their
    allreduce from a loop with the method bound once, buffers made before it.
    """
    timed = getattr(comm, "timed", None)
    if timed is not None:
        seconds = float(timed(send, recv, iterations))
        comm.sync()
        return seconds
    call = comm.allreduce
    start = time.perf_counter()
    for _ in range(iterations):
        call(send, recv)
    comm.sync()
    return time.perf_counter() - start


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _across(comm: Any, seconds: float) -> dict[str, float] | None:
    """One rank's time per call, as the mean, max and min across ranks (on rank 0)."""
    gathered = comm.gather(seconds)
    if comm.rank != 0 or gathered is None:
        return None
    return {
        "seconds": float(np.mean(gathered)),
        "max_seconds": float(np.max(gathered)),
        "min_seconds": float(np.min(gathered)),
    }


def sweep_size(comm: Any, size: int, samples: int, sample_seconds: float, warmup: int) -> None:
    """Warm up, time ``samples`` samples of one message size, verify, report on rank 0.

    Where the backend's figure is not its Python binding's (MPI's C loop), each sample also
    times the binding's own calls right after, the same count, as ``binding_seconds``: the
    pair shares the machine's state, and its ratio is what the binding adds per call.
    """
    elements = max(1, size // 4)
    base = pattern(elements)
    send = comm.buffer(base + np.float32(comm.rank))
    recv = comm.empty(elements)
    binding = getattr(comm, "binding_timed", None) if getattr(comm, "native", None) else None
    comm.barrier()
    _loop(comm, send, recv, max(1, warmup))  # first calls set up the connection
    if binding is not None:
        binding(send, recv, max(1, warmup))  # its warm-up too
    comm.barrier()
    per_call = _loop(comm, send, recv, max(1, warmup)) / max(1, warmup)
    iterations = comm.bcast(max(1, min(1_000_000, round(sample_seconds / max(per_call, 1e-9)))))
    for sample in range(samples):
        comm.barrier()
        timed = _across(comm, _loop(comm, send, recv, iterations) / iterations)
        paired = None
        if binding is not None:
            comm.barrier()
            paired = _across(comm, binding(send, recv, iterations) / iterations)
        if timed is not None:
            line: dict[str, Any] = {"size": size, "sample": sample, **timed}
            if paired is not None:
                line["binding_seconds"] = paired["seconds"]
            _emit({**line, "iterations": iterations})
    verify(comm.host(recv), base, comm.size, size)
    comm.barrier()


def fusion(comm: Any, tensors: int, total: int, samples: int, sample_seconds: float) -> None:
    """K allreduces of total/K bytes against one of ``total`` bytes (Horovod's tensor fusion).

    Each sample times both, interleaved; rank 0 prints the K separate allreduces' time as
    the sample (``seconds``, mean across ranks) and the fused one's as ``fused_seconds``.
    """
    piece = max(1, total // tensors // 4)
    base = pattern(piece)
    small = [(comm.buffer(base + np.float32(comm.rank)), comm.empty(piece)) for _ in range(tensors)]
    fused_base = np.tile(base, tensors)
    fused_send = comm.buffer(fused_base + np.float32(comm.rank))
    fused_recv = comm.empty(piece * tensors)

    def separate() -> None:
        for send, recv in small:
            comm.allreduce(send, recv)

    def fused() -> None:
        comm.allreduce(fused_send, fused_recv)

    iterations = {}
    for name, fn in (("separate", separate), ("fused", fused)):
        for _ in range(3):
            fn()  # warm-up
        comm.sync()
        iterations[name] = comm.bcast(max(1, round(sample_seconds / 2 / max(_one(comm, fn), 1e-9))))
    for sample in range(samples):
        per = {}
        for name, fn in (("separate", separate), ("fused", fused)):
            comm.barrier()
            start = time.perf_counter()
            for _ in range(iterations[name]):
                fn()
            comm.sync()
            per[name] = comm.gather((time.perf_counter() - start) / iterations[name])
        if comm.rank == 0:
            _emit(
                {
                    "sample": sample,
                    "seconds": float(np.mean(per["separate"])),
                    "fused_seconds": float(np.mean(per["fused"])),
                    "tensors": tensors,
                    "tensor_bytes": piece * 4,
                    "total_bytes": piece * 4 * tensors,
                }
            )
    verify(comm.host(small[-1][1]), base, comm.size, piece * 4)
    verify(comm.host(fused_recv), fused_base, comm.size, piece * 4 * tensors)
    comm.barrier()


def _one(comm: Any, fn: Any) -> float:
    comm.barrier()
    start = time.perf_counter()
    fn()
    comm.sync()
    return time.perf_counter() - start


def layout(comm: Any, launcher: str) -> dict[str, Any] | None:
    """Hosts and ranks per host (gathered on rank 0), with the launcher and library."""
    hosts = comm.gather(socket.gethostname())
    if comm.rank != 0 or hosts is None:
        return None
    return {
        "ranks": comm.size,
        "hosts": dict(Counter(hosts)),
        "ranks_per_host": max(Counter(hosts).values()),
        "launcher": launcher,
        "backend": comm.name,
        "device": comm.device,
        **comm.describe(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the sweep on this rank."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=sorted(COMMS), default="mpi")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--sizes", default="", help="comma-separated message sizes in bytes")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--sample-seconds", type=float, default=0.05)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--fusion-tensors", type=int, default=0, help="0: no fusion run")
    parser.add_argument("--fusion-bytes", type=int, default=1 << 20)
    parser.add_argument("--launcher", default="")
    args = parser.parse_args(argv)
    comm = COMMS[args.backend](args.device)
    try:
        facts = layout(comm, args.launcher)
        if facts is not None:
            _emit({"layout": facts})
        for size in (int(s) for s in args.sizes.split(",") if s):
            # More warm-up for small messages, as the OSU benchmarks do.
            warmup = args.warmup * 10 if size <= 8192 else args.warmup
            sweep_size(comm, size, args.samples, args.sample_seconds, warmup)
        if args.fusion_tensors > 1:
            fusion(comm, args.fusion_tensors, args.fusion_bytes, args.samples, args.sample_seconds)
        # The ranks' own CPU time: ranks that a scheduler starts (srun) are not in the
        # session's process tree, and the noise guard must not count them as foreign load.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = comm.gather(usage.ru_utime + usage.ru_stime)
        if comm.rank == 0 and cpu is not None:
            _emit({"rank_cpu_seconds": float(sum(cpu))})
    except VerificationError as exc:
        print(f"rank {comm.rank}: {exc}", file=sys.stderr, flush=True)
        return 3
    finally:
        comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
