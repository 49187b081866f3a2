"""A busy machine: what a run says when other work shares it, and what it judged at all.

Pure tests: fake results and fake noise readings, no real load.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.judge import outcome
from perfsuite.judge.admission import not_saved, refusals
from perfsuite.measure import noise
from perfsuite.model import (
    BareReference,
    BaselineVerdict,
    Expectation,
    FlagKind,
    FloorBecause,
    FloorVerdict,
    MeasuringPolicy,
    NoiseFlag,
    NoiseReading,
    Result,
    Summary,
    Work,
)
from perfsuite.model.finished import Finished, NotSaved, Refusal, Refused
from perfsuite.report.headline import floor_label, headline
from perfsuite.report.notes import verdict_advice
from perfsuite.report.terminal import baseline_lines, no_floor_lines, refusal_words


def _result(name: str, load: float | None = None, **kw: object) -> Result:
    flags = (NoiseFlag(FlagKind.FOREIGN_LOAD, cores=load),) if load and load > 0.25 else ()
    base = Result(
        id=f"suites/t.py::test[{name}]",
        check="c",
        params={},
        metric="m",
        unit="GB/s",
        higher_is_better=True,
        samples=(1.0, 1.1),
        seconds=(1.0, 1.0),
        summary=Summary(1.0, 1.0, 1.0, 1.1, 2, None),
        work=Work(1.0, "B"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("new"),
        noise=NoiseReading(foreign_cores=load),
        noise_flags=flags,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ what the verdict says


def test_a_run_that_judged_nothing_says_measured_and_exits_0() -> None:
    results = [_result(str(i)) for i in range(53)]
    verdict = outcome.session_verdict(results)
    assert verdict.state == "measured" and verdict.exit_code == 0
    assert (
        headline(verdict)
        == "MEASURED (53 checks; no floor reference for this profile, no baseline yet)"
    )
    assert "nothing was judged" in verdict_advice(verdict)


def test_passed_needs_one_check_judged_and_says_how_many() -> None:
    judged = _result("a", floor=FloorVerdict("pass", value=2.0, peak=4.0, estimated=True))
    verdict = outcome.session_verdict([judged, _result("b"), _result("c")])
    assert verdict.state == "passed"
    assert headline(verdict) == (
        "PASSED (1 of 3 checks judged; against estimated floors only, no baseline yet)"
    )
    datasheet = replace(judged, floor=FloorVerdict("pass", value=2.0, peak=4.0))
    verdict = outcome.session_verdict([datasheet, _result("b"), _result("c")])
    assert headline(verdict) == "PASSED (1 of 3 checks judged)"


def test_a_check_judged_only_against_a_baseline_counts_as_judged() -> None:
    ok = _result("a", baseline=BaselineVerdict("ok", ratio=1.0))
    assert headline(outcome.session_verdict([ok])) == "PASSED (1 check)"


def test_inconclusive_advice_under_load_names_the_load_and_perfsuite_ab() -> None:
    noisy = _result("a", 0.95, baseline=BaselineVerdict("noisy", ratio=0.7))
    verdict = outcome.session_verdict([noisy, _result("b")])
    assert verdict.state == "inconclusive"
    advice = verdict_advice(verdict)
    assert advice.startswith("1 measured under foreign load") and "perfsuite ab" in advice
    assert "rerun with --perf-fidelity" in advice
    unpaired = replace(noisy, policy=MeasuringPolicy(references=True))
    advice = verdict_advice(outcome.session_verdict([unpaired, _result("b")]))
    assert advice.startswith(
        "1 measured under foreign load: nothing paired with it cancels the load, so judge it "
        "on a quieter machine, or judge a change with perfsuite ab"
    )
    # Paired now, but its baseline runs were saved without the pairs: save them with them.
    paired = replace(unpaired, bare_reference=BareReference(pair_ratios=(1.0, 1.01)))
    advice = verdict_advice(outcome.session_verdict([paired, noisy, _result("b")]))
    assert advice.startswith(
        "2 measured under foreign load: 1 without --perf-fidelity (rerun with it, or on a "
        "quieter machine) and 1 against baseline runs saved without --perf-fidelity (save "
        "the baseline's runs with it too), or judge a change with perfsuite ab"
    )


# ------------------------------------------------------------------ saving a baseline


def test_a_refusal_is_counted_by_its_reason_not_by_its_figure() -> None:
    assert refusal_words(refusals(_result("a", 0.95), quick=False)) == [
        "measured under foreign load"
    ]
    assert refusal_words(refusals(_result("b", 0.31), quick=False)) == [
        "measured under foreign load"
    ]


def test_refusals_are_typed_and_a_load_paired_with_its_reference_is_kept() -> None:
    loaded = _result("a", 0.95)
    (refusal,) = refusals(loaded, quick=True)[:1]
    assert refusal == Refusal(Refused.FLAGGED, loaded.noise_flags[0])
    assert [r.why for r in refusals(loaded, quick=True)] == [Refused.FLAGGED, Refused.QUICK]
    bare = BareReference(paired=True, pair_ratios=(1.0, 1.01))
    assert refusals(replace(loaded, bare_reference=bare), quick=False) == []
    assert refusal_words([Refusal(Refused.REGRESSED_WAIVED), Refusal(Refused.QUICK)]) == [
        "regressed (waived)",
        "quick mode",
    ]


def test_a_run_saves_no_baseline_when_incomplete_or_crashed_unless_forced() -> None:
    assert not_saved("interrupted", 0, force=True) is NotSaved.INCOMPLETE
    assert not_saved("", 2, force=False) is NotSaved.CRASHED
    assert not_saved("", 2, force=True) is None
    assert not_saved("", 0, force=False) is None


def _finished(results: list[Result], saved: bool) -> Finished:
    refused = {r.id: refusals(r, False) for r in results if refusals(r, False)}
    path = Path("baselines/cpu/baseline.json") if saved else None
    return Finished(
        record=None,  # type: ignore[arg-type]
        baseline_path=path,
        saved=len(results) - len(refused),
        refused=refused,
        asked=True,
    )


def test_a_baseline_refused_under_load_fails_loudly_on_one_line() -> None:
    results = [_result(str(i), 0.6 + i / 100) for i in range(35)]
    done = _finished(results, saved=False)
    assert done.save_failed
    ((line, markup),) = baseline_lines(done, results)
    assert line == (
        "perfsuite: baseline NOT saved: 35 of 35 checks refused: 35 measured under foreign "
        "load (0.60-0.94 cores); rerun with --perf-fidelity (a CPU check with a bare "
        "reference is then paired with it and saved with its load, which cancels in their "
        "ratio) or on a quieter machine; --perf-force-baseline saves them anyway, and their "
        "load widens the baseline"
    )
    assert markup.get("red")


def test_a_refusal_under_fidelity_does_not_advise_fidelity() -> None:
    # An allreduce measured with --perf-fidelity has no bare reference: rerunning with the
    # flag it already had cannot help, and the line says what can.
    fidelity = MeasuringPolicy(references=True)
    results = [_result("a", 0.7, policy=fidelity), _result("b", 0.8, policy=fidelity)]
    ((line, _),) = baseline_lines(_finished(results, saved=True), results)
    assert "--perf-fidelity" not in line
    assert line.endswith(
        "2 measured under foreign load (0.70-0.80 cores); nothing paired with them cancels "
        "the load, so save them on a quieter machine; --perf-force-baseline saves them "
        "anyway, and their load widens the baseline"
    )
    # Some of each: each remedy with its count.
    mixed = [results[0], _result("c", 0.9)]
    ((line, _),) = baseline_lines(_finished(mixed, saved=True), mixed)
    assert (
        "2 measured under foreign load (0.70-0.90 cores); 1 without --perf-fidelity (rerun "
        "with it, or on a quieter machine) and 1 with no bare reference (save it on a "
        "quieter machine); --perf-force-baseline"
    ) in line


def test_a_baseline_saved_in_part_says_which_part_and_still_fails() -> None:
    results = [_result("quiet", 0.02), _result("loaded", 0.9)]
    done = _finished(results, saved=True)
    ((line, _),) = baseline_lines(done, results)
    # The load range is the refused checks' only.
    assert line.startswith(
        "perfsuite: baseline NOT saved for 1 of 2 checks: 1 measured under foreign load "
        "(0.90 cores)"
    )
    assert done.save_failed


def test_a_whole_baseline_saved_is_no_failure() -> None:
    results = [_result("quiet")]
    done = _finished(results, saved=True)
    assert not done.save_failed
    assert baseline_lines(done, results)[0][0] == "perfsuite: baseline saved: 1 entries"


# ------------------------------------------------------------------ a GPU runner's CPU jobs


def _loaded_facts() -> dict[str, object]:
    before = noise.Snapshot(wall=0.0, busy=0.0, steal=0.0, own=0.0, load=(), cpu_mhz=None)
    after = noise.Snapshot(wall=10.0, busy=12.0, steal=0.0, own=2.0, load=(), cpu_mhz=None)
    return noise.assess(before, after)  # 1 core of other work for 10 s


def test_cpu_work_beside_a_device_timed_check_is_recorded_not_flagged() -> None:
    facts = _loaded_facts()
    assert [f.kind for f in facts["flags"]] == [FlagKind.FOREIGN_LOAD]  # type: ignore[attr-defined]
    on_gpu = noise.on_device(facts, "gpu:0", host_share=0.0004, call_s=0.0015)
    assert on_gpu["flags"] == [] and on_gpu["foreign_cores"] == 1.0
    assert on_gpu["load_not_flagged"] == {
        "device": "gpu:0",
        "host_share": 0.0004,
        "graph": False,
        "call_s": 0.0015,
    }
    replayed = noise.on_device(facts, "gpu:0", host_share=0.0004, call_s=5e-6, graph=True)
    assert replayed["flags"] == []


def test_cpu_work_still_flags_a_device_check_it_can_reach() -> None:
    facts = _loaded_facts()
    synced = noise.on_device(facts, "gpu:0", host_share=0.2, call_s=0.01)  # sync-bound
    assert [f.kind for f in synced["flags"]] == [FlagKind.FOREIGN_LOAD]
    # Small kernels launched one by one: the host may pace them, however short the sync.
    assert noise.on_device(facts, "gpu:0", host_share=0.0, call_s=8e-6) is facts
    copy = noise.on_device(facts, "gpu:0", host_share=0.0, call_s=0.01, host_memory=True)
    assert copy is facts  # a copy through host memory
    assert noise.on_device(facts, "gpu:0", host_share=None, call_s=0.01) is facts  # unknown
    assert noise.on_device(facts, "cpu", host_share=0.0, call_s=0.01) is facts  # its own CPUs


# ------------------------------------------------------------------ readings above an estimate


def test_a_reading_above_an_estimated_peak_is_a_finding_about_the_estimate() -> None:
    from perfsuite.report.explain import explain

    floor = FloorVerdict(
        "pass", value=0.21, peak=0.16, fraction=0.5, threshold=0.08, fraction_of_peak=1.32,
        figure="compute.fp32_tflops", estimated=True,
    )  # fmt: skip
    above = _result("conv", floor=floor, unit="TFLOP/s")
    assert outcome.above_estimate(above)
    assert floor_label(above) == "pass (above est. peak)"
    assert "132% of compute.fp32_tflops" in explain(above)
    assert "the estimate is low" in explain(above)
    copy = replace(floor, figure="memory.bandwidth_gbs")
    assert "the measured copy" in explain(replace(above, floor=copy))
    datasheet = replace(above, floor=replace(floor, estimated=False))
    assert not outcome.above_estimate(datasheet)


def test_a_held_flop_count_judges_no_speed_so_the_counts_add_up() -> None:
    """The verdict's judged count and the no-reference outcomes add up to the checks."""
    held = (Expectation("flops", True, "analytic 2.0e9 = counted 2.0e9"),)
    conv = _result("conv", expectations=held)
    gemm = _result("gemm", floor=FloorVerdict("pass", value=2.0, peak=4.0), expectations=held)
    verdict = outcome.session_verdict([conv, gemm, _result("x")])
    assert headline(verdict) == "PASSED (1 of 3 checks judged)"
    assert outcome.counts([conv, gemm, _result("x")])["no-reference"] == 2
    only_counts = outcome.session_verdict([conv])
    assert only_counts.state == "measured" and only_counts.exit_code == 0
    wrong = replace(conv, expectations=(Expectation("flops", False, "off by 2x"),))
    assert headline(outcome.session_verdict([wrong])).startswith("FAILED (1 fail")
    # Tolerated by --perf-fail-on, a failed count is still a verdict, and said to be one.
    tolerated = outcome.session_verdict([wrong, _result("x")], {"regressed"})
    assert (
        headline(tolerated)
        == "PASSED (1 of 2 checks judged; 1 fail not failing under --perf-fail-on)"
    )


def test_checks_without_a_floor_are_one_line_per_reason_with_counts() -> None:
    def none(name: str, check: str, note: str) -> Result:
        floor = FloorVerdict("no-reference", because=FloorBecause.NO_REFERENCE, note=note)
        return replace(_result(name), check=check, floor=floor)

    conv = "batch 1 < 16: judged against its baseline only"
    results = [none(f"c{i}", "conv_roofline", conv) for i in range(3)]
    results.append(none("g", "gemm", "a DeepBench shape: judged against its baseline"))
    results.append(none("s", "storage", "no profile figure for the file system: judged"))
    results.append(_result("p", floor=FloorVerdict("pass", value=2.0, peak=4.0)))
    assert no_floor_lines(results) == [
        "no floor: 3 conv_roofline: batch 1 < 16",
        "no floor: 1 gemm: a DeepBench shape",
        "no floor: 1 storage: no profile figure for the file system",
        "no floor: 5 in all; each check's reason is in the run record and the report",
    ]
    assert no_floor_lines(results[:3]) == ["no floor: 3 conv_roofline: batch 1 < 16"]
    # A reason worded by explain keeps both of its halves (no ": " to cut at).
    other = FloorVerdict(
        "no-reference",
        because=FloorBecause.OTHER_DEVICE,
        profile="h100",
        profile_kind="gpu",
        device_kind="cpu",
        figure="memory.bandwidth_gbs",
    )
    assert no_floor_lines([replace(_result("o"), check="stream", floor=other)]) == [
        "no floor: 1 stream: profile 'h100' describes a gpu; it has no memory.bandwidth_gbs "
        "for a cpu measurement"
    ]


def test_the_floors_line_counts_every_label_so_its_counts_add_up() -> None:
    from perfsuite.report.terminal import verdict_lines

    advisory = _result("pop", floor=FloorVerdict("fail", value=0.5, peak=1.0, advisory=True))
    estimated = _result("gemm", floor=FloorVerdict("fail", value=0.5, peak=1.0, estimated=True))
    lines = verdict_lines([advisory, estimated, _result("x")], outcome.DEFAULT_FAIL_ON)
    assert lines[0][0] == "floors:    1 warning, 1 warning (est.), 1 no-reference"


def test_a_check_without_a_floor_above_its_estimated_ceiling_says_so(tmp_path: Path) -> None:
    """A batch-1 conv has no floor, yet a reading above the CPU's estimated roofline is shown."""
    import datetime as dt

    from perfsuite.hardware.profile import HardwareProfile
    from perfsuite.judge.verdict import Judge
    from perfsuite.measure.loop import Reference, Workload
    from perfsuite.model import Work
    from perfsuite.model.rules import Tolerances
    from perfsuite.settings import Settings
    from perfsuite.store.baseline import BaselineStore

    figures = {"compute.fp32_tflops": 0.16, "memory.bandwidth_gbs": 20.0}
    cpu = HardwareProfile("cpu-x", "", "cpu", "host", figures=figures, estimated=frozenset(figures))
    judge = Judge(
        Settings(),
        cpu,
        BaselineStore(tmp_path).load("cpu-x"),
        Tolerances(),
        [],
        dt.date(2026, 1, 1),
    )
    roof = Reference("roofline", 0.5, "cpu", figures=tuple(figures), combine=lambda p, bw: p)
    conv = Workload(
        check="conv", params={}, metric="conv2d", unit="TFLOP/s", work=Work(1e9, "FLOP"),
        run=lambda: None, scale=1e12, floor_note="batch 1 < 32", ceiling=roof,
    )  # fmt: skip
    above = judge.floor(conv, 0.21, None)
    assert above.verdict == "no-reference" and above.note == "batch 1 < 32"
    assert above.fraction_of_peak == pytest.approx(0.21 / 0.16) and above.estimated
    result = _result("conv", floor=above, unit="TFLOP/s")
    assert floor_label(result) == "no-reference (above est. peak)"
    below = judge.floor(conv, 0.10, None)
    assert below.peak is None and floor_label(_result("conv", floor=below)) == "no-reference"
    datasheet = replace(cpu, estimated=frozenset())  # a datasheet roof: no estimate questioned
    assert (
        Judge(Settings(), datasheet, judge.baseline, Tolerances(), [], judge.today)
        .floor(conv, 0.21, None)
        .peak
        is None
    )
