"""The input-pipeline check: dataset cache, compute limit, classes, and a real quick run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfsuite.checks import input_pipeline as ip
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.inputs import dataset as datasets
from perfsuite.measure import readings

ROOT = Path(__file__).resolve().parents[1]
TINY = datasets.DatasetSpec(images=12, height=48, width=40, shards=3)


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (0.0, "not input-bound"),
        (0.049, "not input-bound"),
        (0.05, "moderately input-bound"),
        (0.199, "moderately input-bound"),
        (0.2, "highly input-bound"),
        (0.9, "highly input-bound"),
    ],
)
def test_input_bound_classes_are_the_tf_profilers(fraction: float, expected: str) -> None:
    assert ip.input_bound_class(fraction) == expected


def test_overlap_is_zero_at_the_sum_and_one_at_the_max() -> None:
    assert ip._overlap(3.0, 1.0, 2.0) == 0.0
    assert ip._overlap(2.0, 1.0, 2.0) == 1.0
    assert ip._overlap(2.5, 1.0, 2.0) == pytest.approx(0.5)


def test_compute_limit_is_the_profile_peak_over_the_model_flops() -> None:
    registry = ProfileRegistry()
    a100 = registry.load("a100")
    limit, source = ip.compute_limit(a100, ip.RESNET50_FLOPS)
    assert ip.compute_precision(a100) == "bf16"
    assert limit == pytest.approx(312e12 / 24.6e9)
    assert "compute.bf16_tflops" in source
    h100 = registry.load("h100-sxm")
    assert ip.compute_limit(h100, 4.1e9)[0] == pytest.approx(
        h100.figure("compute.bf16_tflops") * 1e12 / 4.1e9
    )


def test_without_a_peak_the_gemm_rate_measured_in_this_run_stands_in() -> None:
    nobw = ProfileRegistry([ROOT / "tests" / "fixtures" / "profiles"]).load("nobw")
    nobw = type(nobw)(**{**nobw.__dict__, "figures": {}})
    ref = ip.compute_limit_reference(nobw, ip.RESNET50_FLOPS)
    assert ref.measured is not None and ref.measured > 0
    assert "measured in this run" in ref.figure


@pytest.mark.integration
def test_a_keras_models_training_flops_are_counted(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(10)])
    path = tmp_path / "tiny.keras"
    model.save(path)
    flops, what = ip.model_flops(None, path)
    # MatMul 2 x 64 x 10 and a bias add of 10, forward; training is 3x forward.
    assert flops == pytest.approx(3 * (2 * 64 * 10 + 10), rel=0.05)
    assert "tiny.keras" in what
    assert ip.model_flops(4.1e9, None) == (4.1e9, "--perf-model-flops")
    with pytest.raises(Exception, match="not both"):
        ip.model_flops(4.1e9, path)
    with pytest.raises(Exception, match="cannot load"):
        ip.model_flops(None, tmp_path / "missing.keras")


@pytest.mark.integration
def test_the_dataset_is_built_once_reused_and_rebuilt_when_a_shard_is_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorflow")
    built = datasets.build(TINY, tmp_path)
    assert built.built and len(built.shards) == 3 and len(built.files) == 12
    manifest = json.loads((built.root / datasets.MANIFEST).read_text())
    assert len(manifest["files"]) == 15
    again = datasets.build(TINY, tmp_path)
    assert not again.built and again.root == built.root
    shard = built.shards[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    shard.write_bytes(bytes(data))
    rebuilt = datasets.build(TINY, tmp_path)
    assert rebuilt.built
    assert "SHA-256 differs" in capsys.readouterr().out
    assert not list(tmp_path.glob(".*"))  # no temporary build directory left


def test_a_disk_without_room_for_the_dataset_is_a_clear_error(tmp_path: Path) -> None:
    huge = datasets.DatasetSpec(images=10**9, height=512, width=512, shards=8)
    with pytest.raises(datasets.DatasetError, match=str(tmp_path)):
        datasets.build(huge, tmp_path)


def test_synthetic_images_have_structure_for_jpeg() -> None:
    import numpy as np

    image = datasets.synthetic_image(np.random.default_rng(0), 64, 64)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert image.std() > 20  # not flat: the encoder has work to do


@pytest.mark.integration
def test_a_quick_run_measures_pipelines_training_and_storage(pytester: pytest.Pytester) -> None:
    pytest.importorskip("tensorflow")
    pytester.makeini("[pytest]\nperf_quick = true\n")
    # Quick mode's small dataset, with the cases it leaves out (no prefetch, one file per image).
    pytester.makeconftest((ROOT / "tests" / "fixtures" / "sweep_too.py").read_text())
    shutil.copy(ROOT / "suites" / "test_input_pipeline.py", pytester.path / "test_suite_ip.py")
    # Real pipelines, training steps and reads, sampled briefly through the seam
    # (perfsuite.testing), and no HTML: this test is about what the record holds.
    result = pytester.runpytest(
        "-k", "naive or interleave or input_bound or storage",
        "--perf-data-dir", str(pytester.path / "data"), "-p", "no:cacheprovider",
        "-p", "perfsuite.testing", "--perf-html", "no",
    )  # fmt: skip
    result.assert_outcomes(passed=6)
    (path,) = (pytester.path / "reports").glob("*/*.json")
    record = json.loads(path.read_text())
    section = record["derived"]["input_pipeline"]
    configs = {c["config"]: c for c in section["configs"]}
    assert set(configs) == {"naive", "interleave"}
    tuned = next(r for r in record["results"] if r["params"].get("config") == "interleave")
    assert all(readings.follows_link(r["params"]) for r in record["results"]), (
        "pipelines, training input and storage reads are judged by the CPUs' link state"
    )
    effects = {r["check"]: readings.link_effect(r["params"]) for r in record["results"]}
    assert effects["input_pipeline"] == -1, "the far link only slows a pipeline's handoffs"
    assert all(e == 0 for c, e in effects.items() if c != "input_pipeline"), (
        "training input and storage reads: the far link's way was not measured"
    )
    # On this CPU profile the CPU that trains is its own compute limit: no floor, and why.
    assert tuned["floor"]["verdict"] == "no-reference"
    assert tuned["floor"]["note"].startswith("no floor on a CPU")
    assert configs["interleave"]["first_batch_s"] > 0
    assert configs["interleave"]["cores_needed"] > 0
    assert len(section["training"]) == 2
    for t in section["training"]:
        assert 0 <= t["input_fraction"] <= 1
        assert t["input_bound"] in {name for _, name in ip.INPUT_BOUND} | {"highly input-bound"}
    timeline = Path(section["training"][-1]["timeline"])
    assert timeline.parent.name == "artifacts"
    trace = json.loads(timeline.read_text())
    names = {e["name"] for e in trace["traceEvents"]}
    assert {"wait for input", "train step"} <= names
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert tracks == {"no_prefetch", "prefetch"}
    assert {s["layout"] for s in section["storage"]} == {"tfrecord", "files"}
    assert all(s["files_s"] > 0 for s in section["storage"])


@pytest.mark.integration
def test_a_pipeline_that_cannot_feed_the_device_says_so_in_those_terms(
    pytester: pytest.Pytester,
) -> None:
    """Against an A100's bf16 peak, 2 CPU cores cannot decode ResNet-50's input fast enough."""
    pytest.importorskip("tensorflow")
    pytester.makeini("[pytest]\nperf_quick = true\n")
    shutil.copy(ROOT / "suites" / "test_input_pipeline.py", pytester.path / "test_suite_ip.py")
    result = pytester.runpytest(
        "-k", "interleave", "--hw=a100", "--perf-allow-missing-device",
        "--perf-data-dir", str(pytester.path / "data"), "-p", "no:cacheprovider",
        # The sentence is the subject, not this host's load: a busy runner would make the
        # miss inconclusive (rightly), so the machine's readings come from the steady seam.
        "-p", "perfsuite.testing",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r".*input-bound: pipeline [\d,]+ samples/s < compute limit 12,683 samples/s; about "
            r"[\d.]+x more CPU needed \(\d+ cores here: about [\d,]+ would feed this device\).*"
        ]
    )
