"""POP scaling: the efficiency arithmetic, and injected faults moving the right efficiency.

The unit tests feed the POP model numbers and check its definitions and identities.  The
integration tests start real training ranks under ``mpiexec`` (torch DDP over gloo, and
TensorFlow's MultiWorkerMirroredStrategy, on the CPU) and inject a fault: one rank doing twice the work must move the load balance to the
analytic (N+1)/(2N) and leave the communication efficiency alone; a delay inside the
communication phase must move the communication efficiency and leave the load balance; a
delay inside the input phase must move the input-wait share and leave the load balance.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from perfsuite.checks import pop, scaling
from perfsuite.collectives import train
from perfsuite.collectives.launch import Launcher, LauncherError
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.model import RunRecord
from perfsuite.report import charts
from perfsuite.report.headline import floor_label
from perfsuite.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
needs_ranks = pytest.mark.skipif(
    Launcher.parse("mpiexec").unavailable_reason() is not None
    or importlib.util.find_spec("torch") is None,
    reason="mpiexec or torch not installed; pip install 'perfsuite[mpi,torch]'",
)
# The injections run on each training backend installed here (the ranks import it).
BACKENDS = [
    pytest.param(b, marks=pytest.mark.skipif(not importlib.util.find_spec(b), reason=f"no {b}"))
    for b in ("torch", "tensorflow")
]


@pytest.fixture(autouse=True)
def _not_under_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process pytester runs are one session of their own, whatever runs this file."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)


# ----------------------------------------------------------------------------- arithmetic


def test_load_balance_is_mean_over_max_and_an_injected_double_gives_n_plus_1_over_2n() -> None:
    assert pop.load_balance([2.0, 2.0]) == 1.0
    for n in (2, 3, 8):
        compute = [1.0] * (n - 1) + [2.0]
        assert pop.load_balance(compute) == pytest.approx((n + 1) / (2 * n))


def test_communication_efficiency_is_the_slowest_ranks_compute_over_the_step() -> None:
    assert pop.communication_efficiency([1.0, 3.0], 4.0) == 0.75


def test_strong_scalability_compares_total_compute_for_the_same_work() -> None:
    reference = pop.Reference(compute=10.0, seconds=10.0, samples=32)
    step = pop.Step(compute=(5.5, 5.5), seconds=6.0, samples=32)  # the same 32 samples
    assert pop.computation_scalability(reference, step) == pytest.approx(10 / 11)
    assert pop.strong_scalability(10.0, 11.0) == pytest.approx(10 / 11)


def test_weak_scalability_expects_n_times_the_work_at_n_ranks() -> None:
    reference = pop.Reference(compute=10.0, seconds=10.0, samples=32)
    step = pop.Step(compute=(11.0, 11.0), seconds=12.0, samples=64)  # 32 samples per rank
    assert pop.computation_scalability(reference, step) == pytest.approx(20 / 22)
    assert pop.weak_scalability(10.0, 22.0, ranks=2) == pytest.approx(20 / 22)
    perfect = pop.Step(compute=(10.0, 10.0), seconds=10.0, samples=64)
    assert pop.computation_scalability(reference, perfect) == 1.0


def test_the_tree_multiplies_per_step() -> None:
    reference = pop.Reference(compute=9.0, seconds=10.0, samples=32)
    step = pop.Step(compute=(4.0, 6.0), seconds=8.0, samples=32)
    e = pop.efficiencies(reference, step)
    assert e.load_balance == pytest.approx(5 / 6)
    assert e.communication_efficiency == pytest.approx(6 / 8)
    assert e.parallel_efficiency == pytest.approx(e.load_balance * e.communication_efficiency)
    assert e.computation_scalability == pytest.approx(9 / 10)
    assert e.global_efficiency == pytest.approx(e.parallel_efficiency * e.computation_scalability)
    # Global efficiency is the reference's compute over N x the step; scaling efficiency the
    # reference's whole step over N x the step: they differ by the reference's own CE.
    assert e.global_efficiency == pytest.approx(9 / (2 * 8))
    assert e.scaling_efficiency == pytest.approx(10 / (2 * 8))
    assert e.global_efficiency == pytest.approx(
        e.scaling_efficiency * reference.compute / reference.seconds
    )


def test_weak_scaling_efficiency_is_throughput_per_rank_against_one_rank() -> None:
    reference = pop.Reference(compute=9.0, seconds=10.0, samples=32)
    step = pop.Step(compute=(9.0, 9.0), seconds=12.5, samples=64)
    assert pop.scaling_efficiency(reference, step) == pytest.approx(10 / 12.5)


def test_medians_are_taken_per_efficiency_over_steps() -> None:
    reference = pop.Reference.of([pop.Step((1.0,), 1.0, 8), pop.Step((3.0,), 3.0, 8)])
    assert reference == pop.Reference(compute=2.0, seconds=2.0, samples=8)
    rows = pop.per_step(
        reference,
        [pop.Step((1.0, 2.0), 4.0, 8), pop.Step((2.0, 2.0), 2.5, 8), pop.Step((1.0, 1.0), 2.0, 8)],
    )
    median = pop.median(rows)
    assert median.ranks == 2
    assert median.load_balance == 1.0  # of 0.75, 1, 1
    assert median.communication_efficiency == pytest.approx(0.5)  # of 0.5, 0.8, 0.5
    assert median.value("load_balance") == 1.0
    with pytest.raises(KeyError, match="no POP metric"):
        median.value("speed")
    with pytest.raises(ValueError, match="one rank"):
        pop.Reference.of([pop.Step((1.0, 1.0), 1.0, 8)])


def test_the_input_wait_share_is_the_mean_wait_over_ranks_over_the_step() -> None:
    assert pop.input_wait_share([1.0, 3.0], 8.0) == 0.25
    assert pop.input_efficiency([1.0, 3.0], 8.0) == 0.75
    assert pop.input_wait_share([], 8.0) == 0.0  # no input phase: no wait
    step = pop.Step(compute=(4.0, 6.0), seconds=8.0, samples=32)
    assert pop.efficiencies(pop.Reference(9.0, 10.0, 32), step).input_efficiency == 1.0


def test_input_efficiency_is_an_exact_factor_of_communication_efficiency() -> None:
    # Waiting for input is not useful compute: it is in the step, not in the compute, so
    # it lowers CE by exactly the input efficiency, and POP's identities stay exact.
    reference = pop.Reference(compute=9.0, seconds=10.0, samples=32)
    step = pop.Step(compute=(4.0, 6.0), seconds=9.0, samples=32, input=(0.5, 1.5))
    e = pop.efficiencies(reference, step)
    assert e.input_efficiency == pytest.approx(1 - 1.0 / 9.0)
    beside = pop.communication_efficiency_beside_input(step.compute, step.input, step.seconds)
    assert beside == pytest.approx(6.0 / 8.0)
    assert e.communication_efficiency == pytest.approx(e.input_efficiency * beside)
    assert e.communication_efficiency == pytest.approx(6.0 / 9.0)
    assert e.load_balance == pytest.approx(5 / 6)  # the input never enters the balance
    assert e.parallel_efficiency == pytest.approx(e.load_balance * e.communication_efficiency)
    assert e.global_efficiency == pytest.approx(e.parallel_efficiency * e.computation_scalability)
    assert e.computation_scalability == pytest.approx(9 / 10)  # nor the scalability


def test_an_input_delay_on_fake_phases_moves_input_and_communication_not_balance() -> None:
    reference = pop.Reference(compute=9.0, seconds=10.0, samples=32)
    compute, wait = (4.0, 6.0), 2.0
    before = pop.Step(compute, sum((0.2, 6.0, wait)), 32, input=(0.2, 0.2))
    after = pop.Step(compute, sum((3.2, 6.0, wait)), 32, input=(3.2, 3.2))  # D = 3 s
    e0, e1 = pop.efficiencies(reference, before), pop.efficiencies(reference, after)
    assert e1.load_balance == e0.load_balance
    assert e1.computation_scalability == e0.computation_scalability
    assert e0.input_efficiency == pytest.approx(1 - 0.2 / 8.2)
    assert e1.input_efficiency == pytest.approx(1 - 3.2 / 11.2)
    assert e1.communication_efficiency == pytest.approx(6.0 / 11.2)
    # What the communication itself costs (CE beside the input) did not move.
    assert pop.communication_efficiency_beside_input(
        after.compute, after.input, after.seconds
    ) == pytest.approx(
        pop.communication_efficiency_beside_input(before.compute, before.input, before.seconds)
    )


def test_the_median_input_efficiency_is_one_minus_the_median_share() -> None:
    reference = pop.Reference(compute=1.0, seconds=1.0, samples=8)
    steps = [pop.Step((1.0,), 2.0, 8, (i,)) for i in (0.1, 0.4, 0.2)]
    median = pop.median(pop.per_step(reference, steps))
    assert median.input_efficiency == pytest.approx(1 - 0.1)  # of 0.95, 0.8, 0.9
    assert median.value("input_efficiency") == median.input_efficiency
    assert "input_efficiency" in pop.METRICS


def test_the_host_input_pipeline_makes_new_normalised_batches_from_its_seed() -> None:
    first, again = train.HostInput(16, 7, channels_last=False), train.HostInput(16, 7, False)
    images, labels = first.next()
    assert images.shape == (16, 3, train.IMAGE, train.IMAGE) and images.dtype == np.float32
    assert images.flags.c_contiguous
    assert labels.shape == (16,) and labels.dtype == np.int64
    assert 0 <= labels.min() and labels.max() < train.CLASSES
    same, _ = again.next()
    np.testing.assert_array_equal(images, same)  # seeded
    following, _ = first.next()
    assert not np.array_equal(images, following)  # a new batch every step
    # Normalised: uniform bytes have mean 127.5 / 255 per channel before it.
    means = images.mean(axis=(0, 2, 3))
    np.testing.assert_allclose(means, (0.5 - train.MEAN) / train.STD, atol=0.05)
    nhwc, _ = train.HostInput(4, 7, channels_last=True).next()
    assert nhwc.shape == (4, train.IMAGE, train.IMAGE, 3)


def test_rank_times_carry_the_input_phase_into_the_model_and_the_shares() -> None:
    launch = scaling.Launch("torch", "cpu", 2, 8, 2, 1, "mpiexec -n {ranks}")
    times = scaling.RankTimes(
        launch, (), compute=((4.0, 6.0), (5.0, 5.0)), wait=((2.0, 0.0), (0.0, 0.0)),
        comm=((3.0, 1.0), (1.0, 1.0)), step=((9.0, 9.0), (8.0, 8.0)), compute_clock="wall",
        input=((1.0, 1.0), (2.0, 2.0)),
    )  # fmt: skip
    assert [s.input for s in times.steps()] == [(1.0, 1.0), (2.0, 2.0)]
    assert times.median_share("input") == pytest.approx(statistics.median([1 / 9, 2 / 8]))
    without = replace(times, input=())
    assert all(s.input == () for s in without.steps())
    assert without.median_share("input") == 0.0
    delayed = replace(launch, input_delay_ms=25.0).command()
    assert delayed[delayed.index("--input-delay-ms") + 1] == "25"
    assert "--input-delay-ms" not in launch.command()


def test_the_reference_row_shows_its_input_efficiency_where_recorded() -> None:
    old = {"communication_efficiency": 0.9}
    assert "input_efficiency" not in scaling.reference_row(old)
    row = scaling.reference_row({**old, "input_efficiency": 0.92})
    assert row["input_efficiency"] == 0.92 and row["reference"] is True


def test_the_pop_chart_shows_input_efficiency_with_its_wait_share_per_rank_count() -> None:
    rows = [
        {"ranks": 1, "reference": True, "input_efficiency": 0.92, "load_balance": 1.0},
        {"ranks": 2, "input_efficiency": 0.75, "load_balance": 0.97},
        {"ranks": 4, "load_balance": 0.9},  # recorded before the input phase: no cell
    ]
    section = {"series": [{"backend": "torch", "device": "cpu", "mode": "weak", "rows": rows}]}
    record = RunRecord("r", "2026-11-28", {"name": "cpu"}, {}, (), derived={"scaling": section})
    svg = charts.scaling(charts.ChartContext(record))
    assert svg is not None
    assert "Input efficiency" in svg
    assert "(8% wait)" in svg and "(25% wait)" in svg


# ----------------------------------------------------------------------------- the check


def test_the_series_doubles_up_to_the_largest_count() -> None:
    assert scaling.series(2) == (1, 2)
    assert scaling.series(8) == (1, 2, 4, 8)
    assert scaling.series(6) == (1, 2, 4, 6)


def test_quick_mode_keeps_weak_scaling_at_the_largest_count() -> None:
    quick = [c.id for c in scaling.cases((4,)) if not c.full_only and c.backend == "torch"]
    assert sorted(quick) == sorted(
        f"torch-{d}-weak-4ranks-{m}" for d in ("cpu", "gpu") for m in pop.METRICS
    )
    full = {c.id for c in scaling.cases((4,))}
    assert "torch-cpu-strong-2ranks-load_balance" in full


def test_strong_scaling_splits_the_global_batch_and_weak_scaling_keeps_it_per_rank() -> None:
    assert scaling.batch_per_rank("strong", 2) == scaling.BATCH // 2
    assert scaling.batch_per_rank("weak", 2) == scaling.BATCH
    assert scaling.batch_per_rank("strong", 1) == scaling.batch_per_rank("weak", 1)


def test_under_xdist_the_ranks_are_refused_like_the_allreduces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    case = scaling.Case("torch", "cpu", "weak", 2, "load_balance")
    with pytest.raises(LauncherError, match="xdist workers"):
        scaling.workload(case, Settings(), ProfileRegistry().load("a100"))


def test_an_efficiency_is_a_ratio_with_pops_advisory_floor() -> None:
    case = scaling.Case("torch", "cpu", "weak", 2, "communication_efficiency")
    work = scaling.workload(case, Settings(oversubscribe=True), ProfileRegistry().load("a100"))
    assert work.ratio and work.higher_is_better and work.value(0.42) == 0.42
    assert work.reference is not None and work.reference.advisory
    assert work.reference.fraction == pop.WORTH_A_LOOK


# ----------------------------------------------------------------------------- real ranks

STEPS = 16
BATCH = 128  # per rank: compute dominates the step, so the CE's noise is small beside it
DELAY_MS = 30.0


def _launch(
    backend: str, imbalance: bool = False, comm_delay_ms: float = 0.0, input_delay_ms: float = 0.0
) -> scaling.RankTimes:
    launch = scaling.Launch(backend, "cpu", 2, BATCH, STEPS, 1, "mpiexec -n {ranks}")
    delays = {"comm_delay_ms": comm_delay_ms, "input_delay_ms": input_delay_ms}
    return scaling.run(replace(launch, timeout_s=120, imbalance=imbalance, **delays))


def _per_step(times: scaling.RankTimes, metric: str) -> list[float]:
    if metric == "load_balance":
        return [pop.load_balance(s.compute) for s in times.steps()]
    if metric == "input_wait_share":
        return [pop.input_wait_share(s.input, s.seconds) for s in times.steps()]
    return [pop.communication_efficiency(s.compute, s.seconds) for s in times.steps()]


def _median(times: scaling.RankTimes, metric: str) -> float:
    """An efficiency's median over the timed steps, as the check reports it."""
    return statistics.median(_per_step(times, metric))


def _iqr(values: list[float]) -> float:
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


@dataclass(frozen=True)
class Balanced:
    """Two balanced runs: the efficiencies before an injection, and their noise."""

    backend: str
    runs: tuple[scaling.RankTimes, scaling.RankTimes]

    def median(self, metric: str) -> float:
        return _median(self.runs[0], metric)

    def noise(self, metric: str) -> float:
        """Noise at both levels: within a run (per-step IQR) and from one run to the next."""
        within = max(_iqr(_per_step(r, metric)) for r in self.runs)
        between = abs(_median(self.runs[0], metric) - _median(self.runs[1], metric))
        return max(within, between)


@pytest.fixture(scope="module", params=BACKENDS)
def balanced(request: pytest.FixtureRequest) -> Balanced:
    backend = str(request.param)
    return Balanced(backend, (_launch(backend), _launch(backend)))


def _report(name: str, **figures: float) -> None:
    print(f"{name}: " + json.dumps({k: round(v, 4) for k, v in figures.items()}))


def _judged_on_the_better_of_two(
    launch: Callable[[], scaling.RankTimes],
    better: Callable[[scaling.RankTimes], float],
    check: Callable[[scaling.RankTimes], None],
) -> None:
    """``check`` an injected run; when it fails, the better (by ``better``) of it and another.

    Other work on a busy runner only ever lowers the efficiency ``better`` reads: of two
    runs, the better was disturbed less.  A first run that passes needs no second.
    """
    first = launch()
    try:
        check(first)
    except AssertionError:
        check(max(first, launch(), key=better))


@pytest.mark.integration
@needs_ranks
def test_one_rank_doing_twice_the_work_moves_load_balance_to_n_plus_1_over_2n(
    balanced: Balanced,
) -> None:
    ce0, noise = (
        max(_median(r, "communication_efficiency") for r in balanced.runs),
        balanced.noise("communication_efficiency"),
    )
    expected = (2 + 1) / (2 * 2)
    # CE = max compute / step.  The slowest rank's compute doubles; were the time off it
    # (the allreduce, the barriers) to stay, CE would rise to 2c / (2c + off), which is
    # where it was when compute dominates.  On a busy runner the doubled compute is also
    # preempted twice as long, which lands off the CPU-time compute and pulls CE back:
    # CE stays between where it was and that prediction, within twice its noise.
    predicted = statistics.median(
        2 * max(s.compute) / (2 * max(s.compute) + s.seconds - max(s.compute))
        for s in balanced.runs[0].steps()
    )

    def check(imbalanced: scaling.RankTimes) -> None:
        lb = _median(imbalanced, "load_balance")
        ce = _median(imbalanced, "communication_efficiency")
        _report(
            f"{balanced.backend} imbalance", expected_lb=expected, lb=lb, lb_before=balanced.median("load_balance"),
            ce=ce, ce_before=ce0, ce_predicted=predicted, ce_noise=noise,
        )  # fmt: skip
        assert abs(lb - expected) <= 0.05
        margin = max(2 * noise, 0.05)
        assert min(ce0, predicted) - margin <= ce <= max(ce0, predicted) + margin

    # Preemption by other work only ever lowers CE (it lands in the step, off the CPU-time
    # compute): of two imbalanced runs, the one with the higher CE was disturbed less, as
    # the better of the two balanced runs is the reference.
    _judged_on_the_better_of_two(
        lambda: _launch(balanced.backend, imbalance=True),
        lambda r: _median(r, "communication_efficiency"),
        check,
    )


@pytest.mark.integration
@needs_ranks
def test_a_communication_delay_moves_communication_efficiency_and_not_load_balance(
    balanced: Balanced,
) -> None:
    if balanced.backend != "torch":
        # The delay is injected in the trainers' shared timed_step (train.py): one backend's
        # ranks prove it, and torch's start fastest.  Both backends' imbalance runs above.
        pytest.skip("the communication delay is shared by the trainers: measured on torch")
    # Three balanced steps long at least, so that the move stands out of a busy runner's
    # noise (where the ranks' turns on the CPUs cost more than the allreduce itself).
    steps = balanced.runs[0].steps()
    delay_s = max(DELAY_MS / 1e3, 3 * statistics.median(s.seconds for s in steps))
    lb0 = max(_median(r, "load_balance") for r in balanced.runs)
    ce0 = balanced.median("communication_efficiency")
    predicted = statistics.median(max(s.compute) / (s.seconds + delay_s) for s in steps)
    ce_noise, lb_noise = balanced.noise("communication_efficiency"), balanced.noise("load_balance")

    def check(delayed: scaling.RankTimes) -> None:
        lb, ce = _median(delayed, "load_balance"), _median(delayed, "communication_efficiency")
        _report(
            f"{balanced.backend} delay", delay_ms=delay_s * 1e3, ce_predicted=predicted, ce=ce, ce_before=ce0,
            ce_noise=ce_noise, lb=lb, lb_before=lb0, lb_noise=lb_noise,
        )  # fmt: skip
        # With D at least three balanced steps, CE falls to about a quarter: below half of
        # either balanced run's, whatever the runner did between them.
        assert ce < 0.5 * min(_median(r, "communication_efficiency") for r in balanced.runs)
        assert abs(ce - predicted) <= max(0.1, 2 * ce_noise)
        # The load balance stays within its noise: at least 0.1, the spread of a balanced
        # run's load balance from one run to the next on a busy 2-core VM (0.87-0.99
        # measured), and far less than the communication efficiency moved.
        assert abs(lb - lb0) <= max(2 * lb_noise, 0.1)
        assert ce0 - ce >= 3 * abs(lb - lb0)

    # Contention only ever lowers the load balance (it stretches one rank's compute): of two
    # delayed runs, the one with the higher LB was disturbed less, as the better of the two
    # balanced runs is the reference.
    _judged_on_the_better_of_two(
        lambda: _launch(balanced.backend, comm_delay_ms=delay_s * 1e3),
        lambda r: _median(r, "load_balance"),
        check,
    )


@pytest.mark.integration
@needs_ranks
def test_an_input_delay_moves_the_input_wait_share_and_not_load_balance(
    balanced: Balanced,
) -> None:
    if balanced.backend != "torch":
        # Both trainers wait for input in the same timed_step (train.py); one backend's
        # ranks prove the phase, and torch's start fastest.
        pytest.skip("the input phase is shared by the trainers: measured on torch's ranks")
    steps = balanced.runs[0].steps()
    # Two balanced steps long at least: the share moves to about two thirds, far out of
    # the noise, and the launch costs a few seconds more than a balanced one.
    delay_s = max(DELAY_MS / 1e3, 2 * statistics.median(s.seconds for s in steps))
    share0 = max(_median(r, "input_wait_share") for r in balanced.runs)
    lb0 = max(_median(r, "load_balance") for r in balanced.runs)
    # The same delay on every rank: the step grows by D, and so does the mean input wait.
    predicted = statistics.median(
        (statistics.fmean(s.input) + delay_s) / (s.seconds + delay_s) for s in steps
    )
    lb_noise = balanced.noise("load_balance")
    share_noise = balanced.noise("input_wait_share")

    def check(delayed: scaling.RankTimes) -> None:
        share, lb = _median(delayed, "input_wait_share"), _median(delayed, "load_balance")
        _report(
            f"{balanced.backend} input delay", delay_ms=delay_s * 1e3, share_before=share0,
            share=share, share_predicted=predicted, lb=lb, lb_before=lb0, lb_noise=lb_noise,
        )  # fmt: skip
        assert 0 < share0 < 0.2  # the pipeline's own work: small beside the step
        # Within the share's noise, and at least 0.15: beside another pytest-xdist worker the
        # share once read 0.79 against 0.68 predicted from the balanced runs' steps.
        assert abs(share - predicted) <= max(0.15, 2 * share_noise)
        assert share - share0 >= 0.4
        # The load balance stays within its noise (at least 0.1, as for the delay in the
        # communication phase) and moves far less than the share did.
        assert abs(lb - lb0) <= max(2 * lb_noise, 0.1)
        assert share - share0 >= 3 * abs(lb - lb0)

    _judged_on_the_better_of_two(
        lambda: _launch(balanced.backend, input_delay_ms=delay_s * 1e3),
        lambda r: _median(r, "load_balance"),
        check,
    )


@pytest.mark.integration
@needs_ranks
def test_the_quick_suite_records_the_pop_tree_and_draws_it(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nperf_quick = true\nperf_launch_timeout = 120\n")
    shutil.copy(ROOT / "suites" / "test_scaling.py", pytester.path / "test_suite_scaling.py")
    result = pytester.runpytest("-k", "torch-cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(pop.METRICS), skipped=0)
    (path,) = (pytester.path / "reports").rglob("*.json")
    record = json.loads(path.read_text())
    results = [r for r in record["results"] if r["check"] == "scaling"]
    assert {r["metric"] for r in results} == set(pop.METRICS)
    for r in results:
        assert r["unit"] == "ratio" and r["higher_is_better"] is True
        assert r["floor"]["figure"] == "POP rule of thumb"
        assert r["outcome"] in ("pass", "floor-warning")  # never a failure below 0.8
    (series,) = record["derived"]["scaling"]["series"]
    assert series["mode"] == "weak" and [row["ranks"] for row in series["rows"]] == [1, 2]
    assert series["rows"][1]["threads_per_rank"] == 1
    for row in series["rows"]:
        assert 0 < row["input_efficiency"] <= 1
    share = series["rows"][1]["phase_shares"]["input"]
    assert share == pytest.approx(1 - series["rows"][1]["input_efficiency"], abs=1e-9)
    html = path.with_suffix(".html").read_text()
    assert 'id="chart-scaling"' in html


def test_a_missed_rule_of_thumb_is_a_warning_labelled_against_the_ideal() -> None:
    """POP's 0.8 is advisory: below it warns, reads "of ideal", never "(est.)" or a failure."""
    from perfsuite.judge import outcome, stats
    from perfsuite.model import BaselineVerdict, Result, Summary, Work
    from perfsuite.report import of_reference

    floor = stats.floor_verdict(0.6, 1.0, 0.8, figure="POP rule of thumb", advisory=True)
    result = Result(
        id="s", check="scaling", params={}, metric="efficiency", unit="", higher_is_better=True,
        samples=(0.6,), seconds=(1.0,), summary=stats.summarize([0.6]), work=Work(1.0, "step"),
        floor=floor, baseline=BaselineVerdict("new"),
    )  # fmt: skip
    assert isinstance(result.summary, Summary)
    assert floor.verdict == "fail" and not outcome.floor_missed(result)
    assert outcome.of(result) == "floor-warning"
    assert floor_label(result) == "warning"
    assert of_reference(floor) == "60.0% of ideal"
