"""Unit tests: STREAM byte counting, array sizing and the kernels' arithmetic."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from perfsuite.backends import Target, targets
from perfsuite.backends.base import STREAM_SCALAR
from perfsuite.backends.numpy import NumpyStream
from perfsuite.checks import stream
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.measure import readings


@pytest.mark.parametrize(("kernel", "words"), [("copy", 2), ("scale", 2), ("add", 3), ("triad", 3)])
def test_bytes_are_counted_as_stream_counts_them(kernel: str, words: int) -> None:
    assert stream.counted_bytes(kernel, 1_000_000) == words * 8 * 1_000_000
    assert stream.counted_bytes(kernel, 10, itemsize=4) == words * 4 * 10


def test_arrays_are_four_times_the_cache_and_at_least_1m_elements() -> None:
    assert stream.array_elements(32 * 2**20) == 4 * 32 * 2**20 // 8
    assert stream.array_elements(1024) == 2**20
    odd = stream.array_elements(3 * 10**6)
    assert odd * 8 >= 4 * 3 * 10**6 and odd % 1024 == 0


def test_gpu_arrays_are_sized_from_the_profile_l2() -> None:
    a100 = ProfileRegistry().load("a100")
    size = stream.sizing(Target("tensorflow", "gpu:0"), a100)
    assert size.array_bytes >= 4 * 40 * 2**20
    assert size.cache_source == "profile a100"


def test_unknown_kernel_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown STREAM kernel 'daxpy'"):
        stream.workload(Target("numpy", "cpu"), "daxpy", ProfileRegistry().load("a100"))


@pytest.fixture
def small_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """STREAM's minimum of 1M elements an array, whatever this host's last-level cache."""
    monkeypatch.setattr(
        stream, "sizing", lambda target, profile: stream.Sizing(stream.MIN_ELEMENTS, 0, "test")
    )


@pytest.mark.usefixtures("small_arrays")
def test_host_stream_is_judged_like_with_like_by_the_cpus_link() -> None:
    """Every CPU streaming shares the CPUs' way to memory: compared only with like."""
    host = stream.workload(Target("numpy", "cpu"), "copy", ProfileRegistry().load("a100"))
    try:
        assert host.params["cross_cpu"] == "memory"
        assert readings.follows_link(host.params)
    finally:
        stream.forget()


@pytest.mark.usefixtures("small_arrays")
def test_a_target_s_kernels_share_one_set_of_arrays_until_forgotten() -> None:
    """STREAM's four kernels run on one set of arrays: it is built once per target."""
    a100 = ProfileRegistry().load("a100")
    try:
        copy = stream.workload(Target("numpy", "cpu"), "copy", a100)
        triad = stream.workload(Target("numpy", "cpu"), "triad", a100)
        kernels = copy.run.__self__  # type: ignore[attr-defined]
        assert triad.run.__self__ is kernels  # type: ignore[attr-defined]
        assert copy.close is None  # the check does not free what the next kernel uses
        stream.forget()
        again = stream.workload(Target("numpy", "cpu"), "copy", a100)
        assert again.run.__self__ is not kernels  # type: ignore[attr-defined]
        assert all(pool._shutdown for pool in kernels.pools)  # forgotten: its threads stopped
    finally:
        stream.forget()


def _shares_one_host_set(names: list[str]) -> None:
    """The CPU kernels of numpy, then of each of ``names``, run on one a, b and c."""
    a100 = ProfileRegistry().load("a100")
    try:
        first = stream.workload(Target("numpy", "cpu"), "copy", a100).run.__self__  # type: ignore[attr-defined]
        host = [first.a.ctypes.data, first.b.ctypes.data, first.c.ctypes.data]
        for name in names:
            kernels = stream.workload(Target(name, "cpu"), "copy", a100).run.__self__  # type: ignore[attr-defined]
            arrays = kernels.host if name == "tensorflow" else [kernels.a, kernels.b, kernels.c]
            pointers = [
                x.ctypes.data if isinstance(x, np.ndarray) else x.data_ptr() for x in arrays
            ]
            assert pointers == host, name
            assert all(pool._shutdown for pool in first.pools)  # numpy's kernels were closed
        stream.forget()
        assert all(pool._shutdown for pool in first.pools) and not stream._host
    finally:
        stream.forget()


@pytest.mark.usefixtures("small_arrays")
def test_numpy_and_torch_run_on_one_host_set_until_forgotten() -> None:
    """One fill for the CPU backends: torch's tensors are numpy's memory."""
    _shares_one_host_set(["torch"] if importlib.util.find_spec("torch") else [])


@pytest.mark.integration
@pytest.mark.usefixtures("small_arrays")
def test_tensorflow_runs_on_the_same_host_set() -> None:
    pytest.importorskip("tensorflow")
    _shares_one_host_set(["tensorflow"])


def test_a_plugin_backend_without_a_host_parameter_allocates_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backend registered before the host set existed is called as it was: no host."""
    from perfsuite import backends

    class Old:
        stream_outputs = 0

        def stream_kernels(self, device: str, elements: int, seed: int) -> NumpyStream:
            return NumpyStream(elements, seed)

    monkeypatch.setattr(backends, "get", lambda name: Old())
    size = stream.Sizing(stream.MIN_ELEMENTS, 0, "test")
    try:
        kernels = stream._kernels(Target("old", "cpu"), size)
        assert kernels.a.size == stream.MIN_ELEMENTS and not stream._host
    finally:
        stream.forget()


def test_a_host_set_on_several_memory_nodes_is_filled_by_the_streaming_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunk i's pages are first touched by the thread pinned to the CPU that streams it."""
    import threading

    from perfsuite.backends import numpy as host_backend
    from perfsuite.backends.base import PAGE_BYTES, STREAM_PAGE_OFFSETS

    filled: list[frozenset[int]] = []
    default_rng = np.random.default_rng

    class Watched:  # a generator that notes which CPUs the thread drawing from it may use
        def __init__(self, seed: object) -> None:
            self.rng = default_rng(seed)  # type: ignore[arg-type]

        def random(self, **kwargs: object) -> object:
            filled.append(frozenset(os.sched_getaffinity(0)))
            return self.rng.random(**kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(host_backend, "memory_nodes", lambda: 2)
    monkeypatch.setattr(np.random, "default_rng", Watched)
    threads = threading.active_count()
    arrays = host_backend.host_arrays(100_003, seed=1)
    assert [a.ctypes.data % PAGE_BYTES for a in arrays] == [STREAM_PAGE_OFFSETS[n] for n in "abc"]
    assert all(len(np.unique(a)) > 99_000 for a in arrays)  # random, each its own draw
    cpus = sorted(os.sched_getaffinity(0))
    assert len(filled) == 3 * host_backend.usable_cpus()
    assert set(filled) == {frozenset({cpu}) for cpu in cpus}  # pinned, one CPU each
    assert threading.active_count() == threads  # the fill's threads are gone


def _expected(a: np.ndarray, b: np.ndarray, c: np.ndarray, kernel: str) -> tuple[str, np.ndarray]:
    return {
        "copy": ("c", a.copy()),
        "scale": ("b", STREAM_SCALAR * c),
        "add": ("c", a + b),
        "triad": ("a", b + STREAM_SCALAR * c),
    }[kernel]


@pytest.mark.parametrize("kernel", stream.KERNELS)
def test_numpy_kernels_compute_stream_results_over_threads(kernel: str) -> None:
    # An odd size over 3 threads, in blocks of 4096, exercises chunk edges and a partial block.
    kernels = NumpyStream(100_003, seed=1, threads=3)
    kernels.block = 4096
    try:
        a, b, c = kernels.a.copy(), kernels.b.copy(), kernels.c.copy()
        assert len(np.unique(a)) > 99_000, "arrays must hold random data"
        name, expected = _expected(a, b, c, kernel)
        getattr(kernels, kernel)()
        np.testing.assert_array_equal(getattr(kernels, name), expected)
    finally:
        kernels.close()


@pytest.mark.integration
@pytest.mark.parametrize("kernel", stream.KERNELS)
def test_tensorflow_kernels_compute_stream_results(kernel: str) -> None:
    pytest.importorskip("tensorflow")
    from perfsuite.backends.tensorflow import TensorFlowStream

    kernels = TensorFlowStream("cpu", 4096, seed=1)
    a, b, c = (t.numpy() for t in (kernels.a, kernels.b, kernels.c))
    _, expected = _expected(a, b, c, kernel)
    out = getattr(kernels, kernel)()
    kernels.sync()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-15)


@pytest.mark.integration
def test_tensorflow_cpu_arrays_are_numpy_memory_at_stream_s_page_offsets() -> None:
    """No copy in TensorFlow's pool: a write to the numpy array shows in the tensor."""
    pytest.importorskip("tensorflow")
    from perfsuite.backends.base import PAGE_BYTES, STREAM_PAGE_OFFSETS
    from perfsuite.backends.tensorflow import TensorFlowStream

    kernels = TensorFlowStream("cpu", 4096, seed=1)
    try:
        assert kernels.host is not None
        for name, host in zip("abc", kernels.host, strict=True):
            assert host.ctypes.data % PAGE_BYTES == STREAM_PAGE_OFFSETS[name]
            host[7] = 42.0
            assert getattr(kernels, name)[7].numpy() == 42.0
        assert len({float(h[0]) for h in kernels.host}) == 3  # random, each its own draw
    finally:
        kernels.close()


def test_the_memory_check_counts_a_backend_s_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow's outputs (a fourth array) count against the memory that is available."""
    import psutil

    from perfsuite import backends

    size = stream.Sizing(2**20, 2**18, "test")
    available = 3.5 * size.array_bytes / 0.8  # three arrays fit, four do not
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": available}))
    assert backends.get("numpy").stream_outputs == 0
    assert backends.get("tensorflow").stream_outputs == 1
    stream._check_memory(Target("numpy", "cpu"), size)
    with pytest.raises(MemoryError, match="STREAM needs 4 arrays of 8 MiB"):
        stream._check_memory(Target("tensorflow", "cpu"), size)
    # a host set already held is not counted again: only the output is new
    stream._check_memory(Target("tensorflow", "cpu"), size, held=True)


def test_targets_cover_numpy_cpu_and_a_gpu_slot() -> None:
    ids = [str(t) for t in targets()]
    assert "numpy-cpu" in ids
    assert "tensorflow-cpu" in ids and "tensorflow-gpu:0" in ids


@pytest.mark.integration
def test_fidelity_against_a_bare_reference_is_computed_and_recorded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Check / bare reference is in the record (quick mode: with --perf-fidelity only).

    Without a compiler the reference is no-reference.

    The numpy STREAM checks carry a C reference sampled in pairs with the check's samples;
    the fidelity is the median of the pairs' ratios.
    """
    import json
    import shutil as sh
    import statistics
    from pathlib import Path as P

    suite = P(__file__).resolve().parents[1] / "suites" / "test_memory_bandwidth.py"
    sh.copy(suite, pytester.path / "test_suite_stream.py")
    # The real kernels and the compiled C reference, sampled briefly through the seam
    # (perfsuite.testing), and no HTML: this test is about the pairing and the record.
    monkeypatch.setenv("PYTEST_PLUGINS", "perfsuite.testing")
    pytester.makeini("[pytest]\nperf_quick = true\nperf_html = no\n")
    # Quick mode takes no reference unless asked (it never enters a verdict).
    plain = pytester.runpytest_subprocess(
        "-k", "numpy and triad", "-p", "no:cacheprovider", "--perf-report-dir", "plain"
    )
    plain.assert_outcomes(passed=1)
    (path,) = (pytester.path / "plain").glob("*/*.json")
    record = json.loads(path.read_text())
    assert record["derived"]["fidelity"] == {}
    assert "bare_reference" not in record["results"][0]["context"]
    assert record["results"][0]["phases"]["reference_and_overhead"] >= 0
    # The default mode (quick mode runs triad alone), still brief through the seam.
    pytester.makeini("[pytest]\nperf_html = no\nperf_fidelity = true\n")
    result = pytester.runpytest_subprocess(
        "-k", "numpy and (triad or copy)", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2)
    (path,) = (pytester.path / "reports").glob("*/*.json")
    rows = json.loads(path.read_text())["derived"]["fidelity"]["checks"]
    assert len(rows) == 2
    for row in rows:
        if sh.which("cc") or sh.which("gcc"):
            reference = row["reference"]
            assert reference["value"] > 0 and row["fidelity"] > 0
            assert reference["paired"] is True and len(reference["pair_ratios"]) == 10  # default
            assert reference["value"] == max(reference["samples"])
            assert row["fidelity"] == pytest.approx(statistics.median(reference["pair_ratios"]))
            assert row["status"] == "measured"
    monkeypatch.setenv("CC", "/nonexistent/cc")
    no_cc = pytester.runpytest_subprocess(
        "-k", "numpy and triad", "-p", "no:cacheprovider", "--perf-report-dir", "nocc"
    )
    no_cc.assert_outcomes(passed=1)
    (path,) = (pytester.path / "nocc").glob("*/*.json")
    (row,) = json.loads(path.read_text())["derived"]["fidelity"]["checks"]
    assert row["fidelity"] is None and "no C compiler" in row["reference"]["unavailable"]
    assert row["status"] == "no-reference"


def test_each_chunk_is_touched_and_streamed_by_one_pinned_thread() -> None:
    """First-touch placement is real only if chunk i always runs on the same pinned thread."""
    import os
    import threading

    before = os.sched_getaffinity(0)
    stream_kernels = NumpyStream(1 << 16, seed=1)
    try:
        seen: list[dict[int, tuple[int, frozenset[int]]]] = []
        for _ in range(2):
            placement: dict[int, tuple[int, frozenset[int]]] = {}

            def where(i: int, placement: dict = placement) -> None:
                placement[i] = (threading.get_ident(), frozenset(os.sched_getaffinity(0)))

            stream_kernels.parallel(where)
            seen.append(placement)
        assert seen[0] == seen[1]
        if stream_kernels.pinned:
            cpus = [next(iter(aff)) for _, aff in seen[0].values()]
            assert all(len(aff) == 1 for _, aff in seen[0].values())
            assert len(set(cpus)) == stream_kernels.threads
    finally:
        stream_kernels.close()
    assert os.sched_getaffinity(0) == before  # pinning the pool threads left this one alone


def test_numpy_stream_arrays_keep_stores_away_from_loads_modulo_a_page() -> None:
    """Arrays off the cache line, or stores just ahead of loads modulo 4 KiB, slow a copy loop."""
    from perfsuite.backends.base import PAGE_BYTES as PAGE

    kernels = NumpyStream(100_003, seed=1, threads=3)
    try:
        assert all(getattr(kernels, name).size == 100_003 for name in "abc")
        # (store, load) pairs: copy, scale, add, the fused triad and the blocked triad's phases
        pairs = [("c", "a"), ("b", "c"), ("c", "a"), ("c", "b"), ("a", "b"), ("a", "c")]
        pairs += [("scratch", "c"), ("a", "b"), ("a", "scratch")]
        for i, chunk in enumerate(kernels.chunks):
            where = {n: getattr(kernels, n)[chunk].ctypes.data % PAGE for n in "abc"}
            where["scratch"] = kernels.scratch[i].ctypes.data % PAGE
            assert all(offset % 64 == 0 for offset in where.values()), (i, where)
            for store, load in pairs:
                assert (where[store] - where[load]) % PAGE >= 1024, (i, store, load, where)
    finally:
        kernels.close()


@pytest.mark.parametrize(
    ("l2", "block"),
    [
        (None, 32 * 1024),
        (1 << 20, 128 * 1024),
        (2 << 20, 256 * 1024),
        (64 << 20, 256 * 1024),
        (32 << 10, 16 * 1024),
    ],
)
def test_the_triad_block_is_the_l2_within_bounds(
    monkeypatch: pytest.MonkeyPatch, l2: int | None, block: int
) -> None:
    from perfsuite.backends import numpy as numpy_backend
    from perfsuite.hardware import detect

    monkeypatch.setattr(detect, "core_cache_bytes", lambda level: l2 if level == 2 else None)
    assert numpy_backend.triad_block() == block


@pytest.mark.usefixtures("small_arrays")
def test_a_warm_side_s_server_frees_pages_before_a_set_and_keeps_them_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Around a host set the side asks its server: take before the build, keep after forget."""
    from perfsuite.backends import numpy as host_backend
    from perfsuite.measure import pages

    asked: list[tuple[str, int]] = []
    build = host_backend.host_arrays

    def host_arrays(elements: int, seed: int) -> list[np.ndarray]:
        asked.append(("build", elements))
        return build(elements, seed)

    monkeypatch.setattr(host_backend, "host_arrays", host_arrays)
    monkeypatch.setattr(pages, "connected", lambda: True)
    monkeypatch.setattr(pages, "take", lambda n: asked.append(("take", n)))
    monkeypatch.setattr(pages, "keep", lambda n: asked.append(("keep", n)))
    a100 = ProfileRegistry().load("a100")
    try:
        stream.workload(Target("numpy", "cpu"), "copy", a100)
        stream.workload(Target("numpy", "cpu"), "triad", a100)  # the same set: nothing asked
        elements = next(iter(stream._host))
    finally:
        stream.forget()
    nbytes = 3 * elements * 8
    assert asked[:2] == [("take", nbytes), ("build", elements)]
    # what was freed: the three arrays' memory, each a page longer than its elements
    assert asked[2] == ("keep", 3 * (elements + 4096 // 8) * 8)
    stream.forget()  # nothing held: nothing to keep
    assert len(asked) == 3


@pytest.mark.usefixtures("small_arrays")
def test_a_set_still_referenced_is_not_counted_as_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server keeps only what the side really freed: no second set beside a held one."""
    from perfsuite.measure import pages

    kept: list[int] = []
    monkeypatch.setattr(pages, "connected", lambda: True)
    monkeypatch.setattr(pages, "take", lambda n: None)
    monkeypatch.setattr(pages, "keep", kept.append)
    a100 = ProfileRegistry().load("a100")
    try:
        stream.workload(Target("numpy", "cpu"), "copy", a100)
        held = list(next(iter(stream._host.values())))  # e.g. a traceback's frames
    finally:
        stream.forget()
    assert kept == [0] and len(held) == 3
