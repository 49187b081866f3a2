"""One rank of a data-parallel training step, timed by phase for the POP metrics.

    mpiexec -n 2 python -m perfsuite.collectives.train --backend torch --batch 32 --steps 8

Run by a launcher, never imported by the plugin's process.  Each rank trains the same small
CNN on synthetic images (torch ``DistributedDataParallel``: gloo on the CPU, NCCL on GPUs).
Every step is timed in phases (timers, not a profiler):

* a barrier, so that every rank starts the step together;
* **input**: the wait for the next batch.  The rank's input pipeline (:class:`HostInput`)
  does real per-sample work on the host, as a data loader with no worker processes does
  (torch's ``DataLoader(num_workers=0)``): it "decodes" (uint8 images from a seeded
  generator), crops and flips each sample at random, converts to float, normalises, and
  copies the batch to the device.  Nothing overlaps it (no prefetch), so all of it is time
  the step waits for input: the idle accelerator of the POP/Horovod ResNet-50 case study;
* **compute, part 1**: forward, loss and backward, under DDP's ``no_sync()``, so the
  backward pass only computes the local gradients and never talks to the other ranks;
* **communication**: the gradients flattened into one buffer and summed with one
  ``all_reduce`` (what DDP's bucketed allreduce does, in one bucket), then averaged and
  copied back.  A rank that finished its compute early waits inside this allreduce for
  the slowest rank;
* **compute, part 2**: the optimizer step;
* a barrier, so that the step's wall time on every rank includes the wait for the slowest.

The phases are disjoint: in wall time a rank's step is input + compute + communication
(+ the second barrier).  The step time is the wall time from the first barrier's return to
the second's, and the step's time is the maximum over ranks.  Input is wall time on every
device: waiting for a batch is not useful computation, so it is in the step and not in the
compute, and it lowers the communication efficiency (the input efficiency of
:mod:`perfsuite.checks.pop` is its factor).  Compute is, per rank, the CPU time of the rank's
own thread over the two compute parts (``time.thread_time``) when the device is the CPU,
and the wall time between ``torch.cuda.synchronize()`` calls on a GPU.  CPU time, because
ranks that share a busy host are preempted unevenly: wall time then charges the
scheduler's choices to the rank's work, and load balance reads noise.  With one intra-op
thread per rank (``--threads 1``, set when ranks share a host) the forward and backward
run on the calling thread, so its CPU time is the rank's useful work.  The time a rank
spends preempted is in the step's wall time and lowers the communication efficiency: it is
time the step spent not computing.

Injections, for the correctness tests: ``--imbalance`` has one rank run its forward and
backward twice in every step (twice the work; which rank takes turns, step by step);
``--comm-delay-ms D`` delays the communication
phase by D ms on every rank, polling as a wait on a slow network would (see
:meth:`TorchTrainer.wait_for_all`); ``--input-delay-ms D`` delays the input phase by D ms
on every rank, polling likewise, as a slow input pipeline would.

Rank 0 prints one JSON line ``{"pop_steps": ...}`` with every rank's phase times for every
timed step (gathered with ``all_gather_object``), after a ``{"layout": ...}`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from contextlib import suppress
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from perfsuite.collectives.worker import join_torch_group, layout

IMAGE = 32  # synthetic images: 3 x 32 x 32, 10 classes
CLASSES = 10
PAD = 4  # stored images are 40 x 40: random 32 x 32 crops, CIFAR's pad-by-4 augmentation
# CIFAR-10's per-channel mean and standard deviation, the usual normalisation.
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)


class HostInput:
    """A rank's input pipeline: real per-sample work on the host, a new batch every step.

    Cheap next to the step's compute (a few % of it on one CPU core), but real work, done
    in this process the way a loader without worker processes does it, so that the input
    phase measures a wait that a user's pipeline would also cause: per step, "decode" the
    batch (uint8 images, as a JPEG decoder hands them over, from a seeded generator), then
    per sample a random crop and a random horizontal flip, then float and normalisation
    for the whole batch.  Images come out channels-last (TensorFlow's layout) or
    channels-first (torch's), contiguous.
    """

    def __init__(self, batch: int, seed: int, channels_last: bool) -> None:
        self.rng = np.random.default_rng(seed)
        self.batch, self.channels_last = batch, channels_last
        self.crops = np.empty((batch, IMAGE, IMAGE, 3), dtype=np.uint8)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        """The next batch: float32 images (normalised) and int64 labels."""
        rng, size = self.rng, IMAGE + 2 * PAD
        decoded = rng.integers(0, 256, (self.batch, size, size, 3), dtype=np.uint8)
        corners = rng.integers(0, 2 * PAD + 1, (self.batch, 2))
        flips = rng.random(self.batch) < 0.5
        for i in range(self.batch):
            top, left = corners[i]
            crop = decoded[i, top : top + IMAGE, left : left + IMAGE]
            self.crops[i] = crop[:, ::-1] if flips[i] else crop
        images = (self.crops.astype(np.float32) * np.float32(1 / 255) - MEAN) / STD
        if not self.channels_last:
            images = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
        return images, rng.integers(0, CLASSES, self.batch)


@dataclass(frozen=True)
class RankSteps:
    """One rank's phase times, one entry per timed step (seconds)."""

    input: list[float]  # the wait for the next batch (the input pipeline's work)
    compute: list[float]
    wait: list[float]  # in the communication phase: waiting for the slowest rank
    comm: list[float]  # the whole communication phase (the wait, then the allreduce)
    step: list[float]


def small_cnn(nn: Any) -> Any:
    """The CNN every torch trainer trains (``nn`` is ``torch.nn``)."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, CLASSES),
    )


class TorchTrainer:
    """A small CNN under DistributedDataParallel, with the gradient allreduce done by hand."""

    name = "torch"

    def __init__(self, device: str, batch: int, threads: int, seed: int) -> None:
        import torch
        import torch.distributed as dist
        from torch import nn

        self.torch, self.dist = torch, dist
        if threads > 0:
            torch.set_num_threads(threads)
        self.rank, self.size, self.device, self.backend = join_torch_group(device, "train worker")
        self.setup_model(batch, seed, nn.parallel.DistributedDataParallel)

    def setup_model(self, batch: int, seed: int, wrap: Any = None) -> None:
        """The CNN (``wrap``-ped: DDP), its loss, optimizer, input pipeline and buffers."""
        torch = self.torch
        from torch import nn

        torch.manual_seed(seed)
        model = small_cnn(nn).to(self.device)
        self.model = wrap(model) if wrap is not None else model
        self.loss = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.input = HostInput(batch, seed + self.rank, channels_last=False)
        self.x, self.y = torch.empty(0), torch.empty(0)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.flat = torch.zeros(sum(p.numel() for p in self.params), device=self.device)
        self.token = torch.zeros(1, device=self.device)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    @property
    def clock_name(self) -> str:
        """Which clock times compute: the thread's CPU time, or wall time on a GPU."""
        return "thread_cpu" if self.device == "cpu" else "wall"

    def compute_clock(self) -> float:
        """The rank's CPU time on the CPU; wall time (after a device sync) on a GPU."""
        if self.device == "cpu":
            return time.thread_time()
        self.sync()
        return time.perf_counter()

    def next_batch(self) -> None:
        """The input phase: the pipeline's next batch, copied to the device."""
        images, labels = self.input.next()
        self.x = self.torch.from_numpy(images).to(self.device)
        self.y = self.torch.from_numpy(labels).to(self.device)
        self.sync()

    def forward_backward(self, passes: int) -> None:
        """Forward, loss, backward: local gradients only (no DDP communication)."""
        self.optimizer.zero_grad(set_to_none=False)
        with self.model.no_sync():
            for _ in range(passes):
                self.loss(self.model(self.x), self.y).backward()

    def wait_for_all(self) -> None:
        """Return when every rank has arrived; on the CPU, polling (as MPI's progress does).

        A rank that waits polls, as MPI's progress engines do, instead of sleeping, so
        that the ranks still computing never get a core to themselves that the waiting
        rank gave up: with ranks that share a host's cores (and caches), a blocking wait
        would make the slowest rank's work faster than the others' and skew the load
        balance.  Each poll yields, so that the rank's own communication threads run
        first on its core.
        """
        if self.device != "cpu":
            self.sync()
            self.dist.barrier()
            return
        work = self.dist.all_reduce(self.token, async_op=True)
        while not work.is_completed():
            os.sched_yield()  # polling, but the communication threads on this core go first
        work.wait()

    def allreduce_gradients(self) -> None:
        """One flat allreduce of every gradient, averaged, as DDP's buckets would do."""
        offset = 0
        for p in self.params:
            n = p.numel()
            assert p.grad is not None
            self.flat[offset : offset + n].copy_(p.grad.reshape(-1))
            offset += n
        self.dist.all_reduce(self.flat, op=self.dist.ReduceOp.SUM)
        self.flat.div_(self.size)
        offset = 0
        for p in self.params:
            n = p.numel()
            assert p.grad is not None
            p.grad.copy_(self.flat[offset : offset + n].reshape(p.grad.shape))
            offset += n
        self.sync()

    def optimizer_step(self) -> None:
        self.optimizer.step()

    def barrier(self) -> None:
        self.wait_for_all()

    def gather(self, value: Any) -> list[Any] | None:
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, value)
        return out if self.rank == 0 else None

    def describe(self) -> dict[str, Any]:
        return {
            "library": f"torch.distributed {self.backend} (DistributedDataParallel)",
            "torch": self.torch.__version__,
            "threads_per_rank": self.torch.get_num_threads(),
        }

    def close(self) -> None:
        # Every rank past its last collective before any tears its sockets down: a peer
        # that closes first can abort gloo's background thread on the other ("terminate
        # called without an active exception").
        self.dist.barrier()
        del self.model  # DDP's reducer holds the process group: it goes first
        self.dist.destroy_process_group()


class TensorFlowTrainer:
    """The same CNN in TensorFlow; gradients summed by MultiWorkerMirroredStrategy's RING.

    Each worker keeps its own copy of the variables (the same seed, the same updates, so
    the copies stay equal) and computes its gradients locally; the strategy's cross-worker
    collective (a cross-replica ``reduce_to`` inside a ``tf.function``, the path the
    allreduce worker uses) sums them in one flat buffer.  TensorFlow runs its kernels on
    its own thread pools, so compute is the process's CPU time (``time.process_time``)
    over the compute phases: no collective runs then.  The wait is a tiny reduction, which
    blocks (no polling).
    """

    name = "tensorflow"

    def __init__(self, device: str, batch: int, threads: int, seed: int) -> None:
        from perfsuite.collectives.worker import TensorFlowComm

        if threads > 0:
            os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
            os.environ["TF_NUM_INTEROP_THREADS"] = "1"
        self.comm = TensorFlowComm(device)
        tf = self.comm.tf
        if threads > 0:
            with suppress(RuntimeError):  # already initialised: the variables above hold
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(1)
        self.tf = tf
        self.rank, self.size, self.device = self.comm.rank, self.comm.size, device
        self.threads = threads
        tf.random.set_seed(seed)
        init = tf.keras.initializers.GlorotUniform(seed=seed)
        shapes = [
            (3, 3, 3, 16),
            (16,),
            (3, 3, 16, 32),
            (32,),
            (3, 3, 32, 32),
            (32,),
            (32, CLASSES),
            (CLASSES,),
        ]
        self.variables = [tf.Variable(init(s) if len(s) > 1 else tf.zeros(s)) for s in shapes]
        self.input = HostInput(batch, seed + self.rank, channels_last=True)
        self.x, self.y = tf.zeros((batch, IMAGE, IMAGE, 3)), tf.zeros((batch,), tf.int32)
        self.grads: list[Any] = []
        self._grads = tf.function(self._local_gradients)
        self._apply = tf.function(self._sgd)
        extended = self.comm.strategy.extended
        here = extended.worker_devices[0]

        def reduce(t: Any) -> Any:
            value = self.comm.strategy.run(tf.identity, args=(t,))
            return extended.reduce_to(tf.distribute.ReduceOp.SUM, value, destinations=here)

        self._reduce = tf.function(reduce)

    def _local_gradients(self, x: Any, y: Any) -> list[Any]:
        tf = self.tf
        w1, b1, w2, b2, w3, b3, w4, b4 = self.variables
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME") + b1)
            h = tf.nn.relu(tf.nn.conv2d(h, w2, 2, "SAME") + b2)
            h = tf.nn.relu(tf.nn.conv2d(h, w3, 2, "SAME") + b3)
            logits = tf.matmul(tf.reduce_mean(h, axis=[1, 2]), w4) + b4
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
        return list(tape.gradient(loss, self.variables))

    def _sgd(self, flat: Any) -> None:
        offset = 0
        for v in self.variables:
            n = int(self.tf.size(v))
            v.assign_sub(0.01 * self.tf.reshape(flat[offset : offset + n], v.shape))
            offset += n

    clock_name = "process_cpu"

    def compute_clock(self) -> float:
        return time.process_time()

    def next_batch(self) -> None:
        """The input phase: the pipeline's next batch, as tensors."""
        images, labels = self.input.next()
        self.x = self.tf.convert_to_tensor(images)
        self.y = self.tf.convert_to_tensor(labels.astype(np.int32))

    def forward_backward(self, passes: int) -> None:
        for _ in range(passes):
            self.grads = [g.numpy() for g in self._grads(self.x, self.y)]  # numpy(): work done

    def wait_for_all(self) -> None:
        self.comm.barrier()

    def allreduce_gradients(self) -> None:
        tf = self.tf
        flat = tf.concat([tf.reshape(g, [-1]) for g in self.grads], axis=0)
        self.flat = self._reduce(flat).numpy() / self.size

    def optimizer_step(self) -> None:
        self._apply(self.tf.constant(self.flat))

    def barrier(self) -> None:
        self.comm.barrier()

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's step times, summed through the strategy as one float matrix."""
        if not isinstance(value, dict):
            return self.comm.gather(value)  # small objects (a hostname)
        keys = ("input", "compute", "wait", "comm", "step")
        steps = len(value[keys[0]])
        rows = np.zeros((self.size, len(keys), steps), dtype=np.float64)
        rows[self.rank] = [value[k] for k in keys]
        summed = np.asarray(self.comm._sum(rows.astype(np.float32)), dtype=np.float64)
        out = [{k: summed[r, i].tolist() for i, k in enumerate(keys)} for r in range(self.size)]
        return out if self.rank == 0 else None

    def describe(self) -> dict[str, Any]:
        return {
            "library": "tf.distribute MultiWorkerMirroredStrategy RING (gradient reduction)",
            "tensorflow": self.tf.__version__,
            "threads_per_rank": self.threads or "default",
        }

    def close(self) -> None:
        self.comm.barrier()
        # A ring's peers pull their last chunks from this worker (gRPC RecvBuf) after its
        # own part of the barrier is done; the process must outlive those pulls.
        time.sleep(0.5)


def poll_until(deadline: float) -> None:
    """Wait, polling (and yielding) as a rank waiting on the network does, until ``deadline``.

    Not a sleep: a sleeping rank hands its core to whatever else runs on the host, and the
    next step's compute then shares the core unevenly with it.
    """
    while time.perf_counter() < deadline:
        os.sched_yield()


def timed_step(
    trainer: Any, passes: int, delay_s: float, input_delay_s: float = 0.0
) -> tuple[float, float, float, float, float]:
    """One training step: input, compute, wait, communication and step wall seconds."""
    trainer.barrier()
    start = time.perf_counter()
    trainer.next_batch()  # the wait for the next batch
    if input_delay_s:
        poll_until(time.perf_counter() + input_delay_s)
    i1 = time.perf_counter()
    c0 = trainer.compute_clock()
    trainer.forward_backward(passes)
    c1 = trainer.compute_clock()
    w0 = time.perf_counter()
    trainer.wait_for_all()  # the wait for the slowest rank (inside the allreduce, in DDP)
    w1 = time.perf_counter()
    if delay_s:
        poll_until(time.perf_counter() + delay_s)
    trainer.allreduce_gradients()
    w2 = time.perf_counter()
    c2 = trainer.compute_clock()
    trainer.optimizer_step()
    c3 = trainer.compute_clock()
    trainer.barrier()
    compute = (c1 - c0) + (c3 - c2)
    return i1 - start, compute, w1 - w0, w2 - w0, time.perf_counter() - start


def run(
    trainer: Any,
    steps: int,
    warmup: int,
    imbalance: bool,
    delay_s: float,
    input_delay_s: float = 0.0,
) -> RankSteps:
    """Warm-up steps (discarded), then ``steps`` timed ones."""
    out = RankSteps([], [], [], [], [])
    for i in range(warmup + steps):
        # One rank does twice the work in every step, the last one first, then the others
        # in turn: ranks whose cores run at different speeds (one shared with other work
        # for a whole run) would otherwise bias the load balance the injection must give.
        doubled = (trainer.size - 1 - i) % trainer.size
        passes = 2 if imbalance and trainer.rank == doubled else 1
        took, compute, wait, comm, step = timed_step(trainer, passes, delay_s, input_delay_s)
        if i >= warmup:
            out.input.append(took)
            out.compute.append(compute)
            out.wait.append(wait)
            out.comm.append(comm)
            out.step.append(step)
    return out


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def horovod_trainer(device: str, batch: int, threads: int, seed: int) -> Any:
    """The Horovod training step (:mod:`perfsuite.collectives.horovod`, imported on use)."""
    from perfsuite.collectives.horovod import HorovodTrainer

    return HorovodTrainer(device, batch, threads, seed)


TRAINERS: dict[str, Any] = {
    "torch": TorchTrainer,
    "tensorflow": TensorFlowTrainer,
    "horovod": horovod_trainer,
}


def main(argv: list[str] | None = None) -> int:
    """Train on this rank and, on rank 0, print every rank's phase times."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=sorted(TRAINERS), default="torch")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--steps", type=int, default=8, help="timed steps")
    parser.add_argument("--samples", type=int, default=0, help="timed steps (the plugin's)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads; 0: default")
    parser.add_argument("--imbalance", action="store_true", help="one rank: twice the work")
    parser.add_argument("--comm-delay-ms", type=float, default=0.0)
    parser.add_argument("--input-delay-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--launcher", default="")
    args = parser.parse_args(argv)
    trainer = TRAINERS[args.backend](args.device, args.batch, args.threads, args.seed)
    try:
        facts = layout(trainer, args.launcher)
        if facts is not None:
            _emit({"layout": facts})
        steps = args.samples or args.steps
        delays = args.comm_delay_ms / 1e3, args.input_delay_ms / 1e3
        mine = run(trainer, steps, args.warmup, args.imbalance, *delays)
        every = trainer.gather(asdict(mine))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = trainer.gather(usage.ru_utime + usage.ru_stime)
        if trainer.rank == 0 and every is not None and cpu is not None:
            _emit(
                {
                    "pop_steps": {
                        "ranks": trainer.size,
                        "batch_per_rank": args.batch,
                        "compute_clock": trainer.clock_name,
                        "imbalance": args.imbalance,
                        "comm_delay_ms": args.comm_delay_ms,
                        "input_delay_ms": args.input_delay_ms,
                        "per_rank": every,
                    }
                }
            )
            _emit({"rank_cpu_seconds": float(sum(cpu))})
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Past the last barrier and with everything printed: skip the interpreter's teardown,
    # where torch's C++ threads (the rendezvous store's, gloo's) are destroyed in no set
    # order and now and then abort the rank ("terminate called without an active
    # exception"), failing a launch whose results were complete.
    os._exit(status)
