"""A stored baseline on a busy machine: saved with its load, judged by a measure it cancels in.

Each check here is measured beside its bare reference, sample by sample (``--perf-fidelity``).
Other work slows both sides of a pair alike, so their ratio carries no load.  The runs read
a simulated load through perfsuite's seam (the noise guard's snapshot) and fixed samples
(``pytest_perfsuite_measured``): no real load, no real clock in what a test asserts.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from toy_checks import copy_check

from perfsuite.judge import against
from perfsuite.judge.compare import compare_runs
from perfsuite.measure.loop import Workload
from perfsuite.model import (
    BareReference,
    BaselineFacts,
    BaselineVerdict,
    FlagKind,
    FloorVerdict,
    LoadCancelled,
    NoiseFlag,
    ReferenceChange,
    Result,
    RunRecord,
    Summary,
    Work,
)
from perfsuite.model.baseline import BaselineEntry, BaselineRun, paired_ratios
from perfsuite.report.explain import load_note, load_tag, reference_tag
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"

PAIRED_CHECK = copy_check(1 << 15, paired=True)

# The machine as the runs see it: TOY_LOAD cores of other work beside every check, which
# stretch each pair of samples (the check's and its reference's) by a factor of their own
# (a load that comes and goes between pairs), and TOY_SLOWER, a slowdown of the check alone.
LOADED = """
import dataclasses, itertools, os
import pytest
from perfsuite.measure import loop
from perfsuite.measure.noise import Snapshot
from perfsuite.slowdown import stretched

LOAD = float(os.environ.get("TOY_LOAD", "0"))
SLOWER = float(os.environ.get("TOY_SLOWER", "0"))
READINGS = itertools.count()
SCATTER = (1.0, 1.01, 0.99, 1.005, 0.995, 1.002, 0.998)


@pytest.hookimpl(tryfirst=True)
def pytest_perfsuite_noise_snapshot(with_gpus):
    now = float(next(READINGS))
    return Snapshot(wall=now, busy=now * LOAD, steal=0.0, own=0.0, load=(), cpu_mhz=None)


def pytest_perfsuite_measured(workload, measurement):
    n, calls = len(measurement.seconds), measurement.calls
    shared = [1 + LOAD * (0.3 + 0.5 * ((i * 3) % 7) / 6) for i in range(n)]
    seconds = tuple(1e-3 * calls * SCATTER[i % 7] * shared[i] for i in range(n))
    values = tuple(workload.value(s, calls) for s in seconds)
    bare = workload.bare
    if measurement.bare is None:  # without --perf-fidelity: no reference beside it
        m = dataclasses.replace(measurement, seconds=seconds, values=values)
        return stretched(m, workload, 1 / (1 - SLOWER)) if SLOWER else m
    rates = [
        bare.work * calls / (2e-3 * calls * SCATTER[(i + 3) % 7] * shared[i]) / bare.scale
        for i in range(n)
    ]
    paired = {
        **measurement.bare, "samples": rates, "value": max(rates), "paired": True,
        "pair_ratios": loop.pair_ratios(values, rates),
    }
    m = dataclasses.replace(measurement, seconds=seconds, values=values, bare=paired)
    return stretched(m, workload, 1 / (1 - SLOWER)) if SLOWER else m
"""


@pytest.fixture
def busy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_copy=PAIRED_CHECK)
    pytester.makeconftest(LOADED)
    shutil.copytree(FIXTURES / "profiles", pytester.path / "profiles")
    pytester.makeini("[pytest]\nperf_profile_dir = profiles\nperf_allow_missing_device = true\n")
    return pytester


# Each save a session of its own, as saves hours apart would be (30 min apart by default).
WINDOW = ("--perf-baseline-window", "0")


def _run(p: pytest.Pytester, mp: pytest.MonkeyPatch, load: float, *args: str, slower: float = 0):
    mp.setenv("TOY_LOAD", str(load))
    mp.setenv("TOY_SLOWER", str(slower))
    return p.runpytest("--hw=slowgpu", "-p", "no:randomly", *WINDOW, *args)


def _last(p: pytest.Pytester) -> dict:
    (path,) = sorted((p.path / "reports" / "slowgpu").glob("*.json"))[-1:]
    record = json.loads(path.read_text())
    (result,) = record["results"]
    return dict(result)


def _judged(p: pytest.Pytester, mp: pytest.MonkeyPatch, load: float, *args: str) -> dict:
    """The result of a paired run at ``load`` that passed (exit 0), as its record has it."""
    run = _run(p, mp, load, "--perf-fidelity", *args)
    assert run.ret == 0, run.stdout.str()[-1500:]
    return _last(p)


def _saved(p: pytest.Pytester, mp: pytest.MonkeyPatch, load: float, times: int = 3) -> dict:
    for _ in range(times):
        saved = _run(p, mp, load, "--perf-fidelity", "--perf-save-baseline")
        assert saved.ret == 0, saved.stdout.str()[-1500:]
        saved.stdout.fnmatch_lines(["perfsuite: baseline saved: 1 entries"])
    data = json.loads((p.path / "baselines" / "slowgpu" / "baseline.json").read_text())
    return dict(data["entries"]["test_copy.py::test_copy"])


def test_a_baseline_saved_under_load_keeps_its_pairs_and_its_load(
    busy: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _saved(busy, monkeypatch, load=1.0)
    assert len(entry["runs"]) == 3
    for run in entry["runs"]:
        assert run["load_cores"] == pytest.approx(1.0)
        assert len(run["pair_ratios"]) == len(run["samples"])


def test_under_load_an_unchanged_check_is_ok_and_a_slower_one_regressed_by_its_ratio(
    busy: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _saved(busy, monkeypatch, load=1.0)
    result = _judged(busy, monkeypatch, 1.0)
    assert result["baseline"]["verdict"] == "ok"
    assert result["noise"]["flags"]  # the load is kept in the record
    assert result["facts"]["load_cancelled"]["baseline_runs"] == 3
    slower = _run(busy, monkeypatch, 1.0, "--perf-fidelity", slower=0.2)
    assert slower.ret == 1, slower.stdout.str()[-1500:]
    result = _last(busy)
    assert result["baseline"]["verdict"] == "regressed"
    assert result["baseline"]["ratio"] == pytest.approx(0.8, rel=0.02)
    slower.stdout.fnmatch_lines(["*judged by its ratio to the bare reference (np.copyto, bare)*"])
    # perfsuite compare judges the same records by the same measure.
    paths = sorted((busy.path / "reports" / "slowgpu").glob("*.json"))
    records = [load_record(p) for p in paths]
    rows, _, _ = compare_runs(records[:3], records[-1], window_s=0)
    (row,) = rows
    assert row.verdict == "regressed" and row.load is not None and row.load.baseline_runs == 3
    rows, _, _ = compare_runs(records[:3], records[-2], window_s=0)
    assert [r.verdict for r in rows] == ["ok"]


def test_a_quiet_run_against_a_baseline_saved_under_load_is_judged_by_the_ratio_too(
    busy: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _saved(busy, monkeypatch, load=1.0)
    result = _judged(busy, monkeypatch, 0.0)
    # The raw samples run about 1.6 times as fast as the loaded baseline's; the ratio is same.
    assert result["baseline"]["verdict"] == "ok"
    assert result["facts"]["load_cancelled"]["cores"] == pytest.approx(1.0)


def test_what_a_ratio_verdict_cannot_detect_is_told_from_the_ratios(
    busy: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _saved(busy, monkeypatch, load=1.0)
    # A tolerance no comparison here can detect, so the verdict says what limits it.
    judged = _judged(busy, monkeypatch, 1.0, "--perf-tolerance", "0.0001")
    blind = judged["baseline"]["cannot_detect"]
    # The raw samples scatter with the load (log sd 0.12 here); the ratios do not.
    assert blind["baseline_scatter_sd"] < 0.02


def test_without_pairs_a_save_under_load_fails_loudly_and_names_the_option(
    busy: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = _run(busy, monkeypatch, 1.0, "--perf-save-baseline")
    assert refused.ret == 1
    last = refused.stdout.lines[-1] if "perfsuite: baseline" in refused.stdout.lines[-1] else ""
    text = last or next(x for x in refused.stdout.lines if "baseline NOT saved" in x)
    assert "measured under foreign load" in text and "--perf-fidelity" in text
    assert not (busy.path / "baselines" / "slowgpu" / "baseline.json").exists()


# ------------------------------------------------------------------ the parts, pure


def _entry(*runs: BaselineRun) -> BaselineEntry:
    return BaselineEntry("bandwidth", "GB/s", True, runs)


def _run_of(samples: tuple[float, ...], ratios: tuple[float, ...] = (), load: float | None = None):
    return BaselineRun("r", "2026-12-01T00:00:00+00:00", samples, {}, ratios, load)


LOAD = NoiseFlag(FlagKind.FOREIGN_LOAD, cores=0.9)


def _against(entry: BaselineEntry, values: list[float], flags: list, ratios: list[float]):
    work = Workload(
        check="c", params={}, metric="bandwidth", unit="GB/s", work=Work(1.0, "B"), run=print
    )
    return against.against(work, values, entry, None, 0.05, flags, ratios)


def test_nothing_loaded_is_the_usual_comparison() -> None:
    entry = _entry(_run_of((10.0, 10.1), (0.5, 0.5)))
    assert against.load_plan(entry.runs, [], True) is None
    got = _against(entry, [10.0], [], [0.5])
    assert got.load is None and got.judged == [10.0] and got.used is None


def test_a_loaded_check_with_pairs_is_judged_by_the_ratios_without_the_load_flag() -> None:
    entry = _entry(_run_of((10.0, 10.1)), _run_of((6.0, 6.1), (0.5, 0.51), load=1.1))
    got = _against(entry, [6.0, 6.2], [LOAD], [0.5, 0.52])
    assert got.judged == [0.5, 0.52] and got.runs == [(0.5, 0.51)]
    assert got.compared == [(6.0, 6.1)]  # the runs compared, in the check's own unit
    assert got.noise_flags == [] and got.load == LoadCancelled(1.1, 1, 2)
    assert got.used is not None and len(got.used.runs) == 1  # sessions counted on these


def test_the_load_named_is_the_one_of_the_runs_compared() -> None:
    entry = _entry(_run_of((10.0, 10.1), (0.5, 0.5)), _run_of((6.0, 6.1), load=1.7))
    plan = against.load_plan(entry.runs, [LOAD], True)
    assert plan is not None and plan.runs == (0,) and plan.load == LoadCancelled(0.9, 1, 2)


def test_a_loaded_check_without_pairs_keeps_its_flag() -> None:
    entry = _entry(_run_of((10.0, 10.1), (0.5, 0.5)))
    assert against.load_plan(entry.runs, [LOAD], False) is None  # the usual path, flagged
    got = _against(entry, [6.0], [LOAD], [])
    assert got.noise_flags == [LOAD] and got.load is None


def test_a_quiet_check_is_compared_with_the_quiet_runs_only_by_its_own_samples() -> None:
    entry = _entry(_run_of((10.0, 10.1), (0.5, 0.5)), _run_of((6.0, 6.1), (0.5, 0.5), load=1.0))
    got = _against(entry, [10.0], [], [0.5])  # pairs on both sides, but a quiet run to use
    assert got.runs == [(10.0, 10.1)] and got.noise_flags == [] and got.load is None
    only_loaded = _entry(_run_of((6.0, 6.1), load=1.0))
    got = _against(only_loaded, [10.0], [], [])
    assert [f.kind for f in got.noise_flags] == [FlagKind.FOREIGN_LOAD]
    paired_loaded = _entry(_run_of((6.0, 6.1), (0.5, 0.5), load=1.0))
    got = _against(paired_loaded, [10.0], [], [0.5])
    assert got.load == LoadCancelled(1.0, 1, 1) and got.judged == [0.5]


def test_judged_by_the_ratio_the_reference_move_is_not_claimed() -> None:
    facts = BaselineFacts(
        reference_change=ReferenceChange(0.6, 3), load_cancelled=LoadCancelled(1.0, 3, 3)
    )
    result = _result(BaselineVerdict("regressed", ratio=0.8), facts)
    assert reference_tag(result) == ""
    assert (
        load_tag(result)
        == "judged by its ratio to the bare reference: 1.00 cores of load cancelled"
    )
    assert reference_tag(replace(result, facts=replace(facts, load_cancelled=None)))


def _result(verdict: BaselineVerdict, facts: BaselineFacts) -> Result:
    return Result(
        id="t.py::test_copy", check="toy", params={}, metric="bandwidth", unit="GB/s",
        higher_is_better=True, samples=(1.0, 1.0), seconds=(1.0, 1.0),
        summary=Summary(1.0, 1.0, 1.0, 1.0, 2, None), work=Work(1.0, "B"),
        floor=FloorVerdict("no-reference"), baseline=verdict, facts=facts,
    )  # fmt: skip


def test_only_ratios_taken_in_pairs_count() -> None:
    unpaired = BareReference("ref", 1.0, "GB/s", (1.0, 1.0), paired=False, pair_ratios=(1.0, 1.0))
    assert paired_ratios(unpaired, 2) == ()
    paired = BareReference("ref", 1.0, "GB/s", (1.0, 1.0), paired=True, pair_ratios=(0.5, 0.6))
    assert paired_ratios(paired, 2) == (0.5, 0.6)
    assert paired_ratios(paired, 3) == ()  # not one a sample


def test_the_note_names_the_measure_and_the_load() -> None:
    note = load_note(LoadCancelled(0.93, 3, 4), BareReference("C STREAM copy"))
    assert note.startswith("judged by its ratio to the bare reference (C STREAM copy)")
    assert "0.93 cores" in note and "3 of 4 baseline runs paired" in note


def test_compare_judges_a_loaded_run_by_the_ratios_of_the_paired_runs_only() -> None:
    """A's runs: one quiet without pairs, two loaded with them; B loaded, 20% slower."""
    base = load_record(FIXTURES / "report-run.json")
    first = base.results[0]
    n = len(first.samples)

    def run(i: int, factor: float, load: float | None, paired: bool) -> RunRecord:
        ratios = tuple(0.5 * factor * (1 + 0.002 * (k % 3)) for k in range(n)) if paired else ()
        bare = BareReference("ref", 1.0, first.unit, (1.0,) * n, paired=paired, pair_ratios=ratios)
        flags = (NoiseFlag(FlagKind.FOREIGN_LOAD, cores=load),) if load else ()
        result = replace(
            first, samples=tuple(v * factor for v in first.samples), bare_reference=bare,
            noise_flags=flags, machine=None,
        )  # fmt: skip
        return replace(
            base, run_id=f"r{i}", created=f"2026-11-0{i + 1}T00:00:00+00:00", results=(result,)
        )

    a_runs = [run(0, 1.0, None, False), run(1, 0.6, 1.0, True), run(2, 0.6, 1.1, True)]
    (row,), _, _ = compare_runs(a_runs, run(3, 0.48, 0.9, True), window_s=0)
    assert row.load == LoadCancelled(1.1, 2, 3)
    assert row.verdict in ("regressed", "noisy")  # 2 runs: a young baseline may not confirm
    assert row.comparison.ratio == pytest.approx(0.8, rel=0.01)
    (row,), _, _ = compare_runs(a_runs, run(4, 0.6, 0.9, True), window_s=0)
    assert row.verdict == "ok" and row.comparison.ratio == pytest.approx(1.0, rel=0.01)
