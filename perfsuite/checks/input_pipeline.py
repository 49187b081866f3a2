"""tf.data input pipelines: throughput against the compute limit, storage, input-bound steps.

Three questions: can this node's input pipeline feed the device at its compute limit; if
not, by how much does it fall short; which pipeline practice closes the gap.

* **Throughput** (``input_pipeline``): samples/s of each configuration, after the first
  batch (whose time is recorded apart, as ``tfds.benchmark`` does).  Every sample decodes a
  JPEG, resizes it to 224x224 and flips it at random.
* **Compute limit**: the profile's peak FLOP/s for the model's precision divided by the
  model's FLOPs per sample.  The default model is ResNet-50 at 224x224: 4.1e9
  multiply-adds forward = 8.2 GFLOP (2 FLOPs per multiply-add, the suite's convention),
  training about 3x forward = 24.6 GFLOP per image (the seeds quote "about 20").
  ``--perf-model-flops`` gives another model's cost.  Where the profile has no peak for
  the precision, the fp32 GEMM rate measured in this session stands in, and the reference
  says so.  The tuned configuration must reach the limit x ``HEADROOM``; every
  configuration records its fraction of the limit and the cores it would need.
* **Input-bound steps** (``input_bound``): a small Keras CNN trained from the serial
  (naive) pipeline, with and without a prefetch; the fraction of step time spent waiting
  for input, classed with the TF profiler's thresholds, and the overlap against
  max(load, compute).
* **Storage** (``storage_read``): sequential reads of the TFRecord shards against the
  many-small-files layout, MB/s and files/s, with the page cache dropped per file where the
  platform allows it (``posix_fadvise(DONTNEED)``).

**Timing.**  Every duration here is taken by :mod:`perfsuite.measure`, as every check's is:
the checks' samples by the ``perf`` fixture; the figures recorded beside them by
:func:`perfsuite.measure.loop.measure` under fixed policies of their own (:data:`GEMM_POLICY`,
:data:`PHASE_POLICY`: no settling warm-up, one call a sample); a first batch by
:func:`perfsuite.measure.sources.first_call` (one cold call, whose cost warm-up would hide).
The quantities are those timed by hand here before.  What changed: the loop calibrates with
up to 3 untimed calls before its samples; ``compute_s`` and ``load_s`` are the mean of 12
one-call samples (compute first, its 3 warm-up calls tracing the step), where 12 calls
shared one clock interval (load first); an instrumented step's wait for input is read at a
mark (:class:`~perfsuite.measure.sources.MarkedClock`).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfsuite import sections
from perfsuite.errors import PerfsuiteError
from perfsuite.hardware.profile import HardwareProfile
from perfsuite.inputs.dataset import Dataset, DatasetSpec
from perfsuite.measure import probe
from perfsuite.measure.loop import measure
from perfsuite.measure.sources import MarkedClock, first_call
from perfsuite.measure.workload import Policy, Reference, Workload
from perfsuite.model import Result, Work

IMAGE = 224
BATCH = 64
RESNET50_FLOPS = 3 * 2 * 4.1e9  # training = 3 x forward; forward 4.1e9 multiply-adds
HEADROOM = 1.0  # the tuned pipeline must at least keep up with the compute limit
SHUFFLE_BUFFER = 1024
QUICK = DatasetSpec(images=512, height=160, width=160, shards=4)
FULL = DatasetSpec(images=2048, height=256, width=256, shards=8)
CONFIGS = (
    "naive",
    "parallel_map",
    "prefetch",
    "interleave",
    "cache",
    "shuffle",
    "shard_1_of_2",
    "batch_32",
    "batch_128",
    "many_small_files",
)
FULL_ONLY = frozenset({"batch_32", "batch_128"})
TUNED = "interleave"  # interleave over shards + parallel map + prefetch: the floor's config
QUICK_CONFIGS = frozenset({"naive", TUNED})  # quick mode: the untuned and the tuned pipeline
# The TF profiler's input-bound classes (fraction of step time waiting for input).
INPUT_BOUND = ((0.05, "not input-bound"), (0.20, "moderately input-bound"))
TRAIN_BATCH = 32
STEPS = 12  # samples of the training step's phases: load alone, compute alone, instrumented
GEMM_POLICY = Policy(warmup=1, repetitions=5, references=False, machine_probe=False)
PHASE_POLICY = Policy(warmup=0, repetitions=STEPS, references=False, machine_probe=False)


def input_bound_class(fraction: float) -> str:
    """<5% not input-bound, 5-20% moderately, >=20% highly (the TF profiler's thresholds)."""
    for limit, name in INPUT_BOUND:
        if fraction < limit:
            return name
    return "highly input-bound"


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def _preprocess(tf: Any, jpeg: Any) -> Any:
    image = tf.io.decode_jpeg(jpeg, channels=3)
    image = tf.image.resize(image, [IMAGE, IMAGE])
    return tf.image.random_flip_left_right(image) / 255.0


def pipeline(config: str, dataset: Dataset, batch: int = BATCH, prefetch: bool = True) -> Any:
    """The tf.data pipeline of one configuration, repeating forever.

    ``prefetch=False`` drops the final prefetch of the configurations that have one.
    """
    tf = _tf()
    autotune = tf.data.AUTOTUNE
    feature_spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record: Any) -> Any:
        features = tf.io.parse_single_example(record, feature_spec)
        return _preprocess(tf, features["image"]), features["label"]

    shards = [str(p) for p in dataset.shards]
    if config == "many_small_files":
        files = tf.data.Dataset.from_tensor_slices([str(p) for p in dataset.files])
        ds = files.repeat().map(
            lambda path: (_preprocess(tf, tf.io.read_file(path)), tf.constant(0, tf.int64)),
            num_parallel_calls=autotune,
        )
        return ds.batch(batch).prefetch(autotune)
    if config in ("naive", "parallel_map", "prefetch", "cache"):
        ds = tf.data.TFRecordDataset(shards)
        if config == "cache":
            ds = ds.map(parse, num_parallel_calls=autotune).cache().repeat()
            return ds.batch(batch).prefetch(autotune)
        ds = ds.repeat()
        if config == "naive":
            return _without_injected_prefetch(tf, ds.map(parse).batch(batch), serial=True)
        ds = ds.map(parse, num_parallel_calls=autotune).batch(batch)
        if config == "prefetch":
            return ds.prefetch(autotune)
        return _without_injected_prefetch(tf, ds)
    # interleave and its variants: parallel reads over shards, parallel map, prefetch
    files = tf.data.Dataset.from_tensor_slices(shards)
    if config == "shard_1_of_2":
        files = files.shard(2, 0)  # this worker's half of the files
    ds = files.repeat().interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(shards), 8),
        num_parallel_calls=autotune,
        deterministic=False,
    )
    if config == "shuffle":
        ds = ds.shuffle(SHUFFLE_BUFFER)
    size = {"batch_32": 32, "batch_128": 128}.get(config, batch)
    ds = ds.map(parse, num_parallel_calls=autotune).batch(size)
    return ds.prefetch(autotune) if prefetch else _without_injected_prefetch(tf, ds)


def _without_injected_prefetch(tf: Any, ds: Any, serial: bool = False) -> Any:
    """Keep tf.data from adding what the configuration leaves out.

    tf.data's default optimizations add a prefetch (``inject_prefetch``), make a serial map
    parallel (``map_parallelization``) and fuse map and batch into an asynchronous op
    (``map_and_batch_fusion``); a no-prefetch or serial configuration must not get them
    behind its back.
    """
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    if serial:
        options.experimental_optimization.map_parallelization = False
        options.experimental_optimization.map_and_batch_fusion = False
    return ds.with_options(options)


def batch_size(config: str) -> int:
    """The batch size a configuration uses."""
    return {"batch_32": 32, "batch_128": 128}.get(config, BATCH)


def compute_precision(profile: HardwareProfile) -> str:
    """The precision a model trains in on this profile's device: bf16/fp16 on GPUs, else fp32."""
    if profile.kind == "gpu":
        for precision in ("bf16", "fp16"):
            if profile.figure(f"compute.{precision}_tflops"):
                return precision
    return "fp32"


@functools.cache
def measured_gemm_tflops() -> float:
    """fp32 TFLOP/s of a 2048^3 numpy matmul, best of 5, measured in this session."""
    n = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    gemm = Workload(
        check="input_pipeline",
        params={"gemm": n},
        metric="gemm_tflops",
        unit="TFLOP/s",
        work=Work(2 * n**3, "FLOP", "2 FLOPs per multiply-add of an fp32 matmul"),
        run=lambda: np.matmul(a, b, out=c),
        scale=1e12,
    )
    return max(measure(gemm, GEMM_POLICY).values)


def compute_limit_reference(profile: HardwareProfile, model_flops: float) -> Reference:
    """The tuned pipeline's floor: the compute limit in samples/s, times the headroom."""
    precision = compute_precision(profile)
    key = f"compute.{precision}_tflops"
    if profile.figure(key) is not None:
        return Reference(
            f"compute limit: {key} / {model_flops:.3g} FLOP per sample",
            HEADROOM,
            profile.kind,
            figures=(key,),
            combine=lambda tflops: tflops * 1e12 / model_flops,
        )
    measured = measured_gemm_tflops()
    return Reference(
        f"compute limit: fp32 GEMM measured in this run ({measured:.3g} TFLOP/s; the profile "
        f"has no {key}) / {model_flops:.3g} FLOP per sample",
        HEADROOM,
        profile.kind,
        measured=measured * 1e12 / model_flops,
    )


def compute_limit(
    profile: HardwareProfile, model_flops: float, ref: Reference | None = None
) -> tuple[float, str]:
    """Samples/s the profile's device could train at, and where that figure comes from."""
    ref = ref or compute_limit_reference(profile, model_flops)
    if ref.measured is not None:
        return ref.measured, ref.figure
    assert ref.combine is not None
    return ref.combine(profile.figure(ref.figures[0])), ref.figure


TRAINING_FACTOR = 3  # training ~ forward + backward (2x forward) = 3x forward


@functools.cache
def keras_model_flops(path: str) -> float:
    """Training FLOPs per sample of a saved Keras model: 3 x its forward pass at batch 1.

    The forward pass is counted by TensorFlow's profiler on the model's own input shapes.
    """
    from perfsuite.backends.tensorflow import profiler_count

    tf = _tf()
    try:
        model = tf.keras.models.load_model(path, compile=False)
    except (OSError, ValueError) as exc:
        raise PerfsuiteError(f"--perf-model {path}: cannot load a Keras model: {exc}") from None
    specs = [tf.TensorSpec([1, *t.shape[1:]], t.dtype) for t in model.inputs]
    if any(d is None for s in specs for d in s.shape):
        raise PerfsuiteError(f"--perf-model {path}: its input shape is not fully known")
    forward = profiler_count(lambda *x: model(list(x) if len(x) > 1 else x[0]), *specs)
    if forward <= 0:
        raise PerfsuiteError(f"--perf-model {path}: TensorFlow's profiler counted no FLOPs")
    return float(TRAINING_FACTOR * forward)


def model_flops(settings_flops: float | None, model_path: Path | None) -> tuple[float, str]:
    """FLOPs per training sample and what they are: an explicit figure, a model, or ResNet-50."""
    if settings_flops is not None and model_path is not None:
        raise PerfsuiteError("give --perf-model-flops or --perf-model, not both")
    if settings_flops is not None:
        return settings_flops, "--perf-model-flops"
    if model_path is not None:
        return keras_model_flops(str(model_path)), f"3 x forward FLOPs of {model_path.name}"
    return RESNET50_FLOPS, "ResNet-50 224x224: 3 x 8.2 GFLOP forward"


def cpu_floor_note(limit: float) -> str:
    """Why the tuned pipeline has no floor on a CPU profile."""
    return (
        f"no floor on a CPU: the CPU that would train the model is its own compute limit, "
        f"{limit:.3g} samples/s, which any pipeline beats many times over, so keeping up with "
        "it proves nothing (input_bound measures what the pipeline costs a training step here)"
    )


def usable_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def throughput_workload(
    config: str, dataset: Dataset, profile: HardwareProfile, model_flops: float
) -> Workload:
    """Samples/s of one configuration, after its first batch (timed apart)."""
    ds = pipeline(config, dataset)
    iterator = iter(ds)
    first = first_call(lambda: next(iterator))
    if config == "cache":  # fill the cache: the rest of one full epoch, not timed
        for _ in range(-(-dataset.spec.images // BATCH)):
            next(iterator)
    size = batch_size(config)
    reference = compute_limit_reference(profile, model_flops)
    limit, source = compute_limit(profile, model_flops, reference)
    on_cpu = profile.kind == "cpu"
    return Workload(
        check="input_pipeline",
        params={"config": config, "batch": size, "cross_cpu": probe.HANDOFFS},
        metric="throughput",
        unit="samples/s",
        work=Work(size, "samples", f"one batch of {size} decoded, resized {IMAGE}x{IMAGE} images"),
        run=lambda: next(iterator),
        reference=reference if config == TUNED and not on_cpu else None,
        floor_note=(
            (cpu_floor_note(limit) if on_cpu else "")
            if config == TUNED
            else f"only the tuned configuration ({TUNED}) is held to the compute limit; "
            "this one records its fraction of it and is judged against its baseline"
        ),
        context={
            "first_batch_s": first,
            "compute_limit_samples_s": limit,
            "compute_limit_source": source,
            "floor_fail_text": (
                "input-bound: pipeline {value:,.0f} samples/s < compute limit {threshold:,.0f} "
                "samples/s; about {times:.1f}x more CPU needed ({cpus} cores here: about "
                "{cores_needed:,.0f} would feed this device)"
            ),
            "model_flops_per_sample": model_flops,
            "cpus": usable_cpus(),
            "dataset": str(dataset.root),
            "dataset_built_now": dataset.built,
            "images": dataset.spec.images,
            "source_image": (
                f"{dataset.spec.height}x{dataset.spec.width} JPEG q{dataset.spec.quality}"
            ),
        },
    )


@dataclass
class StepTimes:
    """Per-step wall times of an instrumented training run."""

    waits: list[float]
    steps: list[float]

    @property
    def input_fraction(self) -> float:
        """Time waiting for the next batch / step time."""
        return sum(self.waits) / sum(self.steps)


def _model(tf: Any) -> Any:
    keras = tf.keras
    model = keras.Sequential(
        [
            keras.layers.Input((IMAGE, IMAGE, 3)),
            keras.layers.Conv2D(16, 5, strides=4, activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(100),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _phase(run: Callable[[], object], what: str) -> Workload:
    """A phase of the training step, as the measuring loop times it (one call a sample)."""
    return Workload(
        check="input_bound",
        params={"phase": what},
        metric="seconds",
        unit="s",
        work=Work(1, "calls", what),
        run=run,
        higher_is_better=False,
    )


def _seconds_per_call(run: Callable[[], object], what: str, warmup: int = 0) -> float:
    """Mean seconds of one call over the phase policy's samples."""
    measured = measure(_phase(run, what), replace(PHASE_POLICY, warmup=warmup))
    return statistics.fmean(measured.seconds) / measured.calls


def _instrument(iterator: Any, train: Any) -> StepTimes:
    """Each step's wait for its batch and its whole time, one step a sample."""
    clock = MarkedClock()

    def step() -> None:
        x, y = next(iterator)
        clock.mark()  # the batch is in: the wait for input ends here
        float(train(x, y))  # reading the loss waits for the step

    measured = measure(_phase(step, "instrumented step"), PHASE_POLICY, clock)
    return StepTimes(list(clock.marks), list(measured.seconds))


_TRACES: dict[str, StepTimes] = {}


def write_trace(path: Path) -> None:
    """A Chrome trace-event file of the instrumented runs (one track per variant)."""
    events: list[dict[str, Any]] = []
    for tid, (variant, times) in enumerate(sorted(_TRACES.items()), start=1):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": variant}}
        )
        t = 0.0
        for wait, step in zip(times.waits, times.steps, strict=True):
            events.append(
                {"name": "wait for input", "ph": "X", "pid": 1, "tid": tid,
                 "ts": t * 1e6, "dur": wait * 1e6, "cat": "input"}
            )  # fmt: skip
            events.append(
                {"name": "train step", "ph": "X", "pid": 1, "tid": tid,
                 "ts": (t + wait) * 1e6, "dur": (step - wait) * 1e6, "cat": "compute"}
            )  # fmt: skip
            t += step
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))


def _train_step(tf: Any) -> Any:
    """One training step of a fresh small CNN, as a ``tf.function`` returning the loss."""
    model = _model(tf)

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = model.loss(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return tf.function(step)


def training_workload(variant: str, dataset: Dataset, trace: Path | None) -> Workload:
    """Training samples/s of a small CNN fed by the pipeline, with or without prefetch."""
    tf = _tf()
    train = _train_step(tf)
    # The seeds' comparison: the same serial pipeline, with and without a prefetch that lets
    # loading the next batch overlap this step's compute.
    ds = pipeline("naive", dataset, TRAIN_BATCH)
    if variant == "prefetch":
        ds = ds.prefetch(tf.data.AUTOTUNE)
    iterator = iter(ds)
    x0, y0 = next(iterator)
    # Compute alone (one cached batch; the warm-up traces the step), then load alone (the
    # pipeline, nothing else), then the steps themselves.
    compute = _seconds_per_call(lambda: float(train(x0, y0)), "compute alone", warmup=3)
    load = _seconds_per_call(lambda: next(iterator), "load alone")
    times = _instrument(iterator, train)
    step_s = float(np.median(times.steps))
    _TRACES[variant] = times
    if trace is not None:
        write_trace(trace)
    fraction = times.input_fraction

    def run() -> None:
        x, y = next(iterator)
        float(train(x, y))

    return Workload(
        check="input_bound",
        params={"variant": variant, "batch": TRAIN_BATCH, "cross_cpu": True},  # way not measured
        metric="train_throughput",
        unit="samples/s",
        work=Work(TRAIN_BATCH, "samples", f"one training step of batch {TRAIN_BATCH}"),
        run=run,
        floor_note=(
            "a training step fed by the pipeline: its input-bound fraction is classed with "
            "the TF profiler's thresholds; judged against its baseline"
        ),
        context={
            "input_fraction": fraction,
            "input_bound": input_bound_class(fraction),
            "load_s": load,
            "compute_s": compute,
            "step_s": step_s,
            # 1.0: the step takes max(load, compute), full overlap; 0.0: load + compute.
            "overlap": _overlap(step_s, load, compute),
            "timeline": str(trace) if trace else None,
        },
    )


def _overlap(step: float, load: float, compute: float) -> float:
    """Where the step time sits between load + compute (0) and max(load, compute) (1)."""
    serial, ideal = load + compute, max(load, compute)
    if serial <= ideal:
        return 1.0
    return float(np.clip((serial - step) / (serial - ideal), 0.0, 1.0))


def _drop_cache(path: Path) -> bool:
    """Ask the kernel to drop a file's cached pages; whether the platform allows it."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def storage_workload(layout: str, dataset: Dataset) -> Workload:
    """Sequential reads of one layout, page cache dropped per file where possible."""
    paths = dataset.shards if layout == "tfrecord" else dataset.files
    total = sum(p.stat().st_size for p in paths)
    cold = all(_drop_cache(p) for p in paths[:1])
    buffer = bytearray(1 << 20)

    def run() -> None:
        for path in paths:
            if cold:
                _drop_cache(path)
            with path.open("rb", buffering=0) as fh:
                while fh.readinto(buffer):
                    pass

    return Workload(
        check="storage_read",
        params={"layout": layout, "cross_cpu": True},  # follows the link; way not measured
        metric="read_bandwidth",
        unit="MB/s",
        work=Work(total, "B", f"every byte of {len(paths)} file(s), read sequentially"),
        run=run,
        floor_note="no profile figure for the file system; judged against its baseline",
        scale=1e6,
        context={
            "files": len(paths),
            "bytes": total,
            "page_cache": (
                "cold: posix_fadvise(DONTNEED) before each file's read"
                if cold
                else "warm: the platform cannot drop cached pages"
            ),
        },
    )


def section(profile: HardwareProfile, results: Iterable[Result]) -> dict[str, Any]:
    """Throughput per configuration against the compute limit; input-bound steps; storage."""
    configs, training, storage = [], [], []
    for r in results:
        best = float(np.median(r.samples))
        if r.check == "input_pipeline":
            limit = r.context.get("compute_limit_samples_s")
            cpus = r.context.get("cpus") or 1
            configs.append(
                {
                    "id": r.id,
                    "config": r.params["config"],
                    "samples_s": best,
                    "first_batch_s": r.context.get("first_batch_s"),
                    "compute_limit_samples_s": limit,
                    "compute_limit_source": r.context.get("compute_limit_source"),
                    "fraction_of_limit": best / limit if limit else None,
                    # Assumes the pipeline scales with cores, as tf.data's parallel map does.
                    "cores_needed": limit / (best / cpus) if limit else None,
                    "cpus": cpus,
                }
            )
        elif r.check == "input_bound":
            training.append({"id": r.id, "samples_s": best, **dict(r.context)})
        elif r.check == "storage_read":
            files = r.context.get("files") or 0
            size = r.context.get("bytes") or 0
            storage.append(
                {
                    "id": r.id,
                    "layout": r.params["layout"],
                    "mb_s": best,
                    "files_s": best * 1e6 / size * files if size else None,
                    "page_cache": r.context.get("page_cache"),
                }
            )
    if not (configs or training or storage):
        return {}
    return {"configs": configs, "training": training, "storage": storage}


sections.register("input_pipeline", section)
