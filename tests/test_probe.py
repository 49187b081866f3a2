"""The machine probe: its readings, how a baseline keeps them, and how a verdict uses them."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from perfsuite.errors import StorageError
from perfsuite.hardware.profile import ProfileRegistry
from perfsuite.judge import speed
from perfsuite.judge.verdict import Judge
from perfsuite.measure import probe, readings
from perfsuite.measure.loop import Measurement, Workload
from perfsuite.model import (
    BaselineVerdict,
    Because,
    FlagKind,
    FloorVerdict,
    LinkSubset,
    MachineChange,
    MachineReading,
    NoiseFlag,
    Result,
    Summary,
    Work,
)
from perfsuite.model.rules import Tolerances
from perfsuite.report import explain
from perfsuite.report.explain import flag_words
from perfsuite.settings import Settings
from perfsuite.store.baseline import BaselineStore

SOURCE = "C (cc -O2), one thread, thread CPU time"

READ_PROBE = """
import json
from perfsuite.measure import probe
reading = probe.host_probe().measure()
print(json.dumps(reading))
"""


_DAYS = itertools.count(1)


def _next_day() -> str:
    """A record's ``created``, a day after the one before: each record a session of its own."""
    return (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=next(_DAYS))).isoformat()


def reading(memory: float, compute: float, source: str = SOURCE) -> dict[str, object]:
    return {"memory": memory, "compute": compute, "source": source}


@pytest.mark.parametrize("compiler", ["cc", "/nonexistent/cc"])
def test_the_probe_reads_every_rate_with_or_without_a_compiler(
    compiler: str, tmp_path: Path
) -> None:
    env = {**os.environ, "CC": compiler, "TMPDIR": str(tmp_path)}
    if compiler == "cc" and not any(
        (Path(d) / "cc").exists() for d in os.environ.get("PATH", "").split(os.pathsep)
    ):
        pytest.skip("no C compiler here")
    out = subprocess.run(
        [sys.executable, "-c", READ_PROBE], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    assert all(got[k] > 0 for k in probe.COMPONENTS), got
    if compiler == "cc":
        assert got["source"].startswith("C (")
        if len(probe.pinnable(probe.online_cpus())) > 1:
            assert got["link"] > 0, "two CPUs: the link between them is read"
    else:
        assert got["source"].startswith("numpy and a Python loop"), got["source"]
        assert "no C compiler" in got["source"]


def test_a_check_follows_the_memory_or_the_cache_rate_and_only_on_the_host() -> None:
    assert readings.component_for("GB/s") == "memory"
    assert readings.component_for("MB/s") == "memory"
    assert readings.component_for("TFLOP/s") == "cache"
    assert readings.component_for("µs") == "cache"
    assert readings.follows_host({"device": "cpu"})
    assert readings.follows_host({"config": "cached"}), "no device: a host pipeline"
    assert not readings.follows_host({"device": "gpu:0"})


def test_the_machine_change_needs_the_same_component_and_source_in_every_run() -> None:
    now = {**reading(20.0, 9.0), "component": "memory"}
    runs = [readings.stored({**reading(v, 9.0), "component": "memory"}) for v in (25.0, 24.0, 26.0)]
    change = speed.machine_change(now, runs)
    assert change is not None
    assert change.rates == (25.0, 24.0, 26.0)
    assert change.ratio == pytest.approx(20.0 / float(np.exp(np.mean(np.log([25, 24, 26])))))
    assert speed.machine_change({**now, "component": None}, runs) is None, "a GPU check"
    assert speed.machine_change(now, [*runs, None]) is None, "a run without a probe"
    other = {**now, "source": "numpy and a Python loop, one thread (no C compiler)"}
    assert speed.machine_change(other, runs) is None, "rates of different kernels"
    assert speed.machine_change({**now, "memory": float("nan")}, runs) is None


def test_the_guard_fires_beyond_twice_the_tolerance() -> None:
    def change(ratio: float) -> speed.SpeedChange:
        return speed.SpeedChange("memory", ratio, (1.0,), ratio)

    assert speed.guard(change(0.91), 0.05) is None
    assert speed.guard(change(1.09), 0.05) is None
    slower, faster = speed.guard(change(0.70), 0.05), speed.guard(change(1.15), 0.05)
    assert slower is not None and "ran -30% against its baseline runs" in flag_words(slower)
    assert faster is not None and "+15%" in flag_words(faster)
    assert speed.guard(None, 0.05) is None


def test_the_guard_lets_a_check_that_moved_against_the_machine_be_judged() -> None:
    """Slower beyond the tolerance on a faster machine: the machine cannot have caused it."""

    def change(ratio: float) -> speed.SpeedChange:
        return speed.SpeedChange("cache", ratio, (1.0,), ratio)

    assert speed.guard(change(1.15), 0.05, raw=0.80) is None
    assert speed.guard(change(0.80), 0.05, raw=1.10) is None, "faster on a slower machine"
    assert speed.guard(change(1.15), 0.05, raw=0.97) is not None, "within its tolerance"
    assert speed.guard(change(0.80), 0.05, raw=0.70) is not None, "slower with the machine"
    assert speed.guard(change(1.15), 0.05, raw=1.20) is not None, "faster with the machine"


def test_the_guard_lets_a_check_that_moved_far_beyond_the_machine_be_judged() -> None:
    """Pinned to one core under -n 2: STREAM at 0.26-0.32 while the memory probe read -9..-18%."""
    change = speed.SpeedChange("memory", 0.87, (1.0,), 0.87)
    assert speed.guard(change, 0.05, raw=0.30) is None, "the machine cannot make it 3x slower"
    assert speed.guard(change, 0.05, raw=0.80) is not None, "within twice the machine's move"
    faster = speed.SpeedChange("memory", 1.15, (1.0,), 1.15)
    assert speed.guard(faster, 0.05, raw=1.60) is None


def test_the_raw_ratio_is_the_check_against_the_baseline_runs_unadjusted() -> None:
    runs = [[10.0, 10.0], [40.0, 40.0]]  # geometric mean of the run medians: 20
    assert speed.raw_ratio([16.0, 16.0], runs, higher_is_better=True) == pytest.approx(0.8)
    assert speed.raw_ratio([25.0, 25.0], runs, higher_is_better=False) == pytest.approx(0.8)


def test_a_checks_reading_is_the_faster_of_before_and_after_with_both_kept() -> None:
    before = {"memory": 30.0, "cache": 100.0, "compute": 50.0, "link": 6.0, "source": SOURCE}
    after = {"memory": 24.0, "cache": 130.0, "compute": 50.0, "link": 25.0, "source": SOURCE}
    out = probe.combine(before, after)
    assert {k: out[k] for k in ("memory", "cache", "compute", "link")} == {
        "memory": 30.0,  # a slowed reading (a framework's threads still spinning) is not kept
        "cache": 130.0,
        "compute": 50.0,
        "link": 25.0,
    }
    assert out["before"]["link"] == 6.0 and out["after"]["memory"] == 24.0
    assert out["source"] == SOURCE
    without_link = probe.combine(
        {**before, "link": 6.0}, {k: v for k, v in after.items() if k != "link"}
    )
    assert "link" not in without_link


def test_adjusting_divides_a_rate_and_multiplies_a_latency() -> None:
    assert speed.adjust([10.0, 20.0], 2.0, higher_is_better=True) == [5.0, 10.0]
    assert speed.adjust([10.0, 20.0], 2.0, higher_is_better=False) == [20.0, 40.0]


def result(node_id: str, samples: list[float], machine: dict[str, object] | None) -> Result:
    reading = None if machine is None else {**machine, "component": "memory"}
    return Result(
        id=node_id,
        check="toy",
        params={"device": "cpu"},
        metric="bandwidth",
        unit="GB/s",
        higher_is_better=True,
        samples=tuple(samples),
        seconds=tuple(1 / s for s in samples),
        summary=Summary(1.0, 1.0, 1.0, 1.0, len(samples), None),
        work=Work(1e9, "B"),
        floor=FloorVerdict("no-reference"),
        baseline=BaselineVerdict("new"),
        machine=MachineReading.read(reading),
    )


def test_each_baseline_run_keeps_its_probe_rate_and_a_bad_one_is_a_load_error(
    tmp_path: Path,
) -> None:
    store = BaselineStore(tmp_path)
    store.save("cpu", [result("a", [10.0, 11.0], reading(25.0, 9.0))], "run-1")
    store.save("cpu", [result("a", [12.0, 13.0], None)], "run-2")
    entry = store.load("cpu").get("a")
    assert entry is not None
    kept = [m and m.to_dict() for m in entry.machines]
    assert kept == [{"component": "memory", "memory": 25.0, "source": SOURCE}, None]
    assert speed.judged_run_samples(entry) == entry.run_samples, "not every run has a probe"
    path = tmp_path / "cpu" / "baseline.json"
    data = json.loads(path.read_text())
    data["entries"]["a"]["runs"][0]["policy"]["machine"]["memory"] = -1
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(StorageError, match="machine-probe rate"):
        store.load("cpu")
    assert path.read_bytes() == before


LEVELS = [1.0, 0.72, 0.95, 0.7, 1.02]
CENTRE = float(np.exp(np.mean(np.log(LEVELS))))


def explained(result: Result) -> Result:
    """The result with the sentences the session attaches after judging."""
    return explain.explained(result)


def judge_once(tmp_path: Path, drop: float, machine_drop: float, probed: bool = True) -> Result:
    """Judge a check whose samples fell by ``drop`` while the probe fell by ``machine_drop``.

    The baseline's five runs differ by up to 30% in level, and each run's probe moved with
    it: the machine's slow and fast spells, not the check.  ``probed=False``: the baseline
    runs kept no probe, as before there was one.
    """
    rng = np.random.default_rng(3)
    store = BaselineStore(tmp_path)
    for i, level in enumerate(LEVELS):
        samples = list(20.0 * level * (1 + 0.005 * rng.standard_normal(10)))
        machine = reading(25.0 * level, 9.0) if probed else None
        store.save("cpu", [result("a", samples, machine)], f"run-{i}")
    judge = Judge(
        Settings(baseline_window_s=0),  # the runs saved here stand for separate sessions
        ProfileRegistry().load("a100"),
        store.load("cpu"),
        Tolerances(),
        [],
        dt.date(2026, 1, 1),
    )
    values = tuple(20.0 * CENTRE * (1 - drop) * (1 + 0.005 * rng.standard_normal(10)))
    workload = Workload(
        check="toy",
        params={"device": "cpu"},
        metric="bandwidth",
        unit="GB/s",
        work=Work(1e9, "B"),
        run=lambda: None,
    )
    measurement = Measurement(seconds=tuple(1 / v for v in values), values=values, timer="t")
    plan = judge.plan("a", workload, None)
    machine = reading(25.0 * CENTRE * (1 - machine_drop), 9.0)
    return explained(judge.judge("a", workload, measurement, plan, machine=machine))


def test_a_slowdown_of_the_check_alone_is_a_regression_despite_a_wandering_machine(
    tmp_path: Path,
) -> None:
    judged = judge_once(tmp_path, drop=0.2, machine_drop=0.0)
    assert judged.baseline.verdict == "regressed", judged.message
    assert "judged per unit of machine speed" in judged.message
    change = judged.facts.machine_change
    assert change is not None
    assert change.component == "memory" and change.baseline_runs == 5
    assert change.ratio == pytest.approx(1.0)
    assert judged.baseline.ratio == pytest.approx(0.8, rel=0.02)
    assert judged.baseline.baseline_median == pytest.approx(20 * CENTRE, rel=0.02), (
        "the baseline median stays in the check's own unit"
    )


def test_without_the_probe_the_same_baseline_cannot_see_that_slowdown(tmp_path: Path) -> None:
    """The 30% spells in the baseline runs make their spread swallow a 20% drop."""
    judged = judge_once(tmp_path, drop=0.2, machine_drop=0.0, probed=False)
    assert judged.baseline.verdict != "regressed", judged.message
    assert judged.facts.machine_change is None
    assert "machine_change" not in judged.to_dict()["facts"]


def test_a_check_that_slowed_with_the_machine_has_not_changed(tmp_path: Path) -> None:
    judged = judge_once(tmp_path, drop=0.3, machine_drop=0.3)
    assert judged.baseline.verdict == "ok", judged.message
    assert judged.baseline.ratio == pytest.approx(1.0, rel=0.02), "adjusted, it did not move"
    assert judged.to_dict()["facts"]["machine_change"]["ratio"] == pytest.approx(0.7)


def test_beyond_the_guard_a_change_is_noisy_not_a_regression(tmp_path: Path) -> None:
    """A change measured on a machine 30% slower is not confirmed either way.

    How closely a check follows the probe is not exact, and such a machine is not quiet.
    """
    judged = judge_once(tmp_path, drop=0.45, machine_drop=0.3)
    assert judged.baseline.verdict == "noisy", judged.message
    assert "the machine itself ran -30% against its baseline runs" in judged.message
    assert judged.baseline.ratio == pytest.approx(0.55 / 0.7, rel=0.02)


def test_a_slowdown_on_a_faster_machine_is_a_regression_not_noise(tmp_path: Path) -> None:
    """The probe ran 30% faster and the check 25% slower: no machine spell explains that."""
    judged = judge_once(tmp_path, drop=0.25, machine_drop=-0.3)
    assert judged.baseline.verdict == "regressed", judged.message
    assert "the machine itself" not in judged.message


def test_a_gpu_reading_is_recorded_but_not_kept_for_adjusting() -> None:
    assert readings.stored({**reading(25.0, 9.0), "component": None}) is None
    assert speed.machine_change({**reading(25.0, 9.0), "component": None}, [{}]) is None


def test_perfsuite_compare_judges_per_machine_speed_as_the_plugin_does() -> None:
    from perfsuite.judge.compare import compare_runs
    from perfsuite.model import RunRecord

    rng = np.random.default_rng(5)

    def record(run_id: str, level: float, machine_level: float) -> RunRecord:
        samples = list(20.0 * level * (1 + 0.005 * rng.standard_normal(10)))
        r = result("a", samples, reading(25.0 * machine_level, 9.0))
        return RunRecord(run_id, _next_day(), {"name": "cpu"}, {}, (r,))

    before = [record(f"a{i}", level, level) for i, level in enumerate(LEVELS)]
    rows, _, _ = compare_runs(before, record("b", CENTRE * 0.8, CENTRE))
    assert rows[0].verdict == "regressed", rows[0].decision
    assert rows[0].machine is not None and rows[0].machine.ratio == pytest.approx(1.0)
    rows, _, _ = compare_runs(before, record("b", CENTRE * 0.55, CENTRE * 0.7))
    assert rows[0].verdict == "noisy"
    assert rows[0].decision.why.because is Because.NOISE_FLAGS
    assert "the machine itself ran -30%" in flag_words(rows[0].noise_flags[-1])


def test_the_terminal_and_the_report_say_how_far_the_machine_moved_only_when_it_did() -> None:
    from perfsuite.model import RunRecord
    from perfsuite.report.html import render
    from perfsuite.report.notes import machine_note

    def moved(node_id: str, ratio: float, component: str, flagged: bool = False) -> Result:
        r = result(node_id, [10.0, 11.0], reading(25.0, 9.0))
        change = MachineChange(component, ratio, 5)
        flag = NoiseFlag(FlagKind.MACHINE_MOVED, ratio=ratio, component=component)
        flags = (flag,) * flagged
        verdict = BaselineVerdict("noisy" if flagged else "ok", ratio=1.0, noise_flags=flags)
        return replace(r, facts=replace(r.facts, machine_change=change), baseline=verdict)

    quiet = [moved("a", 0.98, "memory"), moved("b", 1.03, "compute")]
    assert machine_note(quiet) == ""
    slow = [
        moved("a", 0.70, "memory"),
        moved("b", 0.75, "compute", flagged=True),
        moved("c", 0.71, "compute"),
    ]
    note = machine_note(slow)
    assert "ran -30% (memory)" in note and "-27% (compute)" in note, note
    assert "median over 3 CPU checks" in note
    assert "1 change(s) left noisy" in note
    page = render(RunRecord("r", "2026-01-01", {"name": "cpu"}, {}, tuple(slow)))
    assert 'id="machine-note"' in page and "ran -30% (memory)" in page
    assert 'id="machine-note"' not in render(
        RunRecord("r", "2026", {"name": "cpu"}, {}, tuple(quiet))
    )


def linked(link: float, before: float | None = None) -> dict[str, object]:
    """A reading with the CPUs' link rate (M handoffs/s), steady unless ``before`` differs."""
    base = {"memory": 25.0, "cache": 100.0, "compute": 9.0, "source": SOURCE}
    edge = {"before": {**base, "link": before or link}, "after": {**base, "link": link}}
    return {**base, "link": link, **edge}


def test_the_link_state_picks_the_baseline_runs_measured_in_the_same_state() -> None:
    runs = [linked(25.0), linked(6.0), linked(24.0), linked(5.8), linked(26.0)]
    assert speed.link_state(linked(24.5), runs) == ([0, 2, 4], None)
    assert speed.link_state(linked(6.1), runs) == ([1, 3], None)
    assert speed.link_state(linked(25.0), [linked(25.0), linked(20.0)]) == (None, None)
    same, flag = speed.link_state(linked(60.0), runs)
    assert same is None and flag is not None
    assert "another state than in every" in flag_words(flag)
    same, flag = speed.link_state(linked(6.0, before=25.0), runs)
    assert same is None and flag is not None and "changed state during" in flag_words(flag)
    unread = {k: v for k, v in linked(25.0).items() if k != "link"}
    assert speed.link_state(linked(6.0), [unread, linked(6.0)]) == ([1], None), (
        "a run without a reading is in no state"
    )
    assert speed.link_state(linked(6.0), [unread, unread]) == (None, None), "older: as before"
    assert speed.link_state({"memory": 1.0}, runs) == (None, None)
    assert readings.follows_link({"device": "cpu", "ranks": 2})
    assert not readings.follows_link({"device": "cpu", "ranks": 1})
    assert not readings.follows_link({"device": "gpu:0", "ranks": 2})
    assert not readings.follows_link({"device": "cpu"})
    assert readings.follows_link({"config": "prefetch", "batch": 64, "cross_cpu": True})
    assert not readings.follows_link({"device": "gpu:0", "cross_cpu": True})
    assert readings.link_effect({"device": "cpu", "cross_cpu": "memory"}) == 1
    assert readings.link_effect({"config": "prefetch", "cross_cpu": "handoff"}) == -1
    assert readings.link_effect({"device": "cpu", "ranks": 2, "size": 64 << 10}) == -1
    assert readings.link_effect({"device": "cpu", "ranks": 2, "total_bytes": 1 << 20}) == -1
    assert readings.link_effect({"device": "cpu", "ranks": 2, "size": 16 << 20}) == 0, (
        "a large message also streams memory: the far link's way is not known"
    )
    assert readings.link_effect({"device": "cpu", "ranks": 2}) == 0
    assert readings.link_effect({"device": "cpu", "cross_cpu": True}) == 0, "an older record"
    assert readings.link_effect({"device": "cpu"}) == 0


def test_the_link_bounds_are_the_runs_in_the_states_that_bound_the_check() -> None:
    runs = [linked(25.0), linked(6.0), linked(24.0), linked(5.8), {"memory": 25.0}]
    across = linked(6.0, before=25.0)
    # Memory-bound work runs slowest with the nearest link: a slowdown is judged against
    # the near runs, a speed-up against the far ones.
    assert speed.link_bounds(across, runs, 1) == {"slower": [0, 2], "faster": [1, 3]}
    assert speed.link_bounds(across, runs, -1) == {"slower": [1, 3], "faster": [0, 2]}
    assert speed.link_bounds(linked(60.0), runs, 1) == {"slower": [], "faster": [1, 3]}
    assert speed.link_bounds(across, runs, 0) == {"slower": [], "faster": []}
    # Readings a little over 2x apart: a run in the state of both bounds neither way.
    between = [linked(6.0), linked(8.0), linked(14.0)]
    assert speed.link_bounds(linked(11.0, before=5.0), between, 1) == {
        "slower": [2],
        "faster": [],
    }
    other = [{**linked(25.0), "source": "numpy"}, linked(24.0)]
    assert speed.link_bounds(across, other, 1) == {"slower": [1], "faster": []}, (
        "a reading from another probe source is no state"
    )
    assert speed.link_bounds({"memory": 1.0}, runs, 1) == {"slower": [], "faster": []}


def stream_like(samples: list[float], link: float, before: float | None = None) -> Result:
    """Host STREAM on every CPU (GB/s) with a probe reading of the CPUs' link."""
    r = result("copy", samples, None)
    machine = {**linked(link, before), "component": "memory"}
    params = {"device": "cpu", "cross_cpu": "memory"}
    return replace(r, params=params, machine=MachineReading.read(machine))


def test_host_stream_measured_across_link_states_is_judged_against_its_slowest_state(
    tmp_path: Path,
) -> None:
    """All baseline runs near (30 GB/s); the far state only ever speeds STREAM up."""
    rng = np.random.default_rng(17)
    store = BaselineStore(tmp_path)
    for i, link in enumerate([25.0, 24.0, 26.0, 23.0, 25.5]):
        store.save("cpu", [stream_like(list(30 * (1 + 0.01 * rng.standard_normal(10))), link)],
                   f"run-{i}")  # fmt: skip
    judge = Judge(
        Settings(baseline_window_s=0), ProfileRegistry().load("a100"), store.load("cpu"), Tolerances(), [],
        dt.date(2026, 1, 1),
    )  # fmt: skip

    def judged(
        rate: float, link: float, before: float, kind: object = "memory", spread: float = 0.01,
        values: tuple[float, ...] = (),
    ) -> Result:  # fmt: skip
        params = {"device": "cpu", "cross_cpu": kind}
        workload = Workload(
            check="toy", params=params, metric="bandwidth", unit="GB/s",
            work=Work(1.0, "B"), run=lambda: None,
        )  # fmt: skip
        values = values or tuple(rate * np.exp(spread * rng.standard_normal(10)))
        measurement = Measurement(seconds=values, values=values, timer="t")
        plan = judge.plan("copy", workload, None)
        return explained(
            judge.judge("copy", workload, measurement, plan, machine=linked(link, before))
        )

    slower = judged(20.0, 6.0, before=25.0)
    assert slower.baseline.verdict == "regressed", slower.message
    assert slower.facts.link_state is not None and slower.facts.link_state.bound == "slower"
    assert "changed state during the measurement" in slower.message
    faster = judged(45.0, 6.0, before=25.0)  # what the far state does to STREAM
    assert faster.baseline.verdict == "noisy", faster.message
    far = judged(20.0, 6.0, before=6.0)  # a state no baseline run was in
    assert far.baseline.verdict == "regressed", far.message
    # A bound comparison never clears a check: not significant is noisy, not ok.
    wide = (10.0, 40.0, 12.0, 38.0, 20.0, 35.0, 15.0, 30.0, 18.0, 33.0)  # median 25: 0.83
    scattered = judged(0.0, 6.0, before=25.0, values=wide)
    assert scattered.baseline.verdict == "noisy", scattered.message
    assert "against the baseline runs that bound it" in scattered.baseline.reason
    older = judged(20.0, 6.0, before=25.0, kind=True)  # no direction: as before
    assert older.baseline.verdict == "noisy", older.message
    assert "bound" not in older.to_dict()["facts"].get("link_state", {})


def collective(samples: list[float], link: float) -> Result:
    """A two-rank latency check (µs) with a probe reading of the CPUs' link."""
    r = result("ar", samples, None)
    return replace(
        r,
        params={"device": "cpu", "ranks": 2, "size": 64 << 10},
        metric="latency",
        unit="µs",
        higher_is_better=False,
        machine=MachineReading.read({**linked(link), "component": "cache"}),
    )


def test_a_collective_is_compared_with_the_runs_of_its_link_state(tmp_path: Path) -> None:
    """Baseline runs in two link states (25 and 55 µs): each state is judged on its own."""
    rng = np.random.default_rng(11)
    store = BaselineStore(tmp_path)
    for i, (latency, link) in enumerate([(25, 25.0), (55, 6.0), (25, 24.0), (56, 5.9), (25, 26.0)]):
        samples = list(latency * (1 + 0.01 * rng.standard_normal(10)))
        store.save("cpu", [collective(samples, link)], f"run-{i}")
    judge = Judge(
        Settings(baseline_window_s=0), ProfileRegistry().load("a100"), store.load("cpu"), Tolerances(), [],
        dt.date(2026, 1, 1),
    )  # fmt: skip
    workload = Workload(
        check="toy", params={"device": "cpu", "ranks": 2, "size": 64 << 10}, metric="latency",
        unit="µs", work=Work(1.0, "op"), run=lambda: None, higher_is_better=False,
    )  # fmt: skip

    def judged(latency: float, link: float, before: float | None = None) -> Result:
        values = tuple(latency * (1 + 0.01 * rng.standard_normal(10)))
        measurement = Measurement(seconds=values, values=values, timer="t")
        plan = judge.plan("ar", workload, None)
        machine = linked(link, before)
        return explained(judge.judge("ar", workload, measurement, plan, machine=machine))

    slower = judged(30.0, 25.0)
    assert slower.baseline.verdict == "regressed", slower.message
    assert slower.to_dict()["facts"]["link_state"] == {"baseline_runs": 3, "of": 5}
    assert "3 of 5 baseline runs measured with the CPUs' link" in slower.message
    assert slower.baseline.baseline_median == pytest.approx(25.0, rel=0.02)
    assert judged(55.0, 6.0).baseline.verdict == "ok"
    elsewhere = judged(20.0, 60.0)  # faster, with a nearer link than any baseline run's
    assert elsewhere.baseline.verdict == "noisy", elsewhere.message
    assert "another state than in every baseline run" in elsewhere.message
    # A nearer link only ever speeds a collective up: slower than every state's runs is real.
    beyond = judged(120.0, 60.0)
    assert beyond.baseline.verdict == "regressed", beyond.message
    assert beyond.facts.link_state == LinkSubset(2, 5, "slower", beyond.facts.link_state.state)
    assert "the link cannot explain a check slower than those" in beyond.message
    # Across both states and faster than the near state's runs: no link explains that.
    quicker = judged(12.0, 25.0, before=6.0)
    assert quicker.baseline.verdict == "improved", quicker.message
    assert quicker.baseline.judged_against_bound == "faster"


def test_perfsuite_compare_compares_a_collective_like_with_like() -> None:
    from perfsuite.judge.compare import compare_runs
    from perfsuite.model import RunRecord

    rng = np.random.default_rng(13)

    def record(run_id: str, latency: float, link: float) -> RunRecord:
        r = collective(list(latency * (1 + 0.01 * rng.standard_normal(10))), link)
        return RunRecord(run_id, _next_day(), {"name": "cpu"}, {}, (r,))

    states = [(25, 25.0), (55, 6.0), (25, 24.0), (56, 5.9), (25, 26.0)]
    before = [record(f"a{i}", latency, link) for i, (latency, link) in enumerate(states)]
    rows, _, _ = compare_runs(before, record("b", 30.0, 25.0))
    assert rows[0].verdict == "regressed", rows[0].decision
    rows, _, _ = compare_runs(before, record("b", 55.0, 6.0))
    assert rows[0].verdict == "ok", rows[0].decision

    def stream(run_id: str, rate: float, link: float, before: float | None = None) -> RunRecord:
        r = stream_like(list(rate * (1 + 0.01 * rng.standard_normal(10))), link, before)
        return RunRecord(run_id, _next_day(), {"name": "cpu"}, {}, (r,))

    near = [stream(f"a{i}", 30.0, link) for i, link in enumerate([25.0, 24.0, 26.0, 23.0])]
    rows, _, _ = compare_runs(near, stream("b", 20.0, 6.0, before=25.0))
    assert rows[0].verdict == "regressed", rows[0].decision
    rows, _, _ = compare_runs(near, stream("b", 45.0, 6.0, before=25.0))
    assert rows[0].verdict == "noisy", rows[0].decision
    # Faster than the near state's runs, measured across both states: improved.
    across = collective(list(12.0 * (1 + 0.01 * rng.standard_normal(10))), 25.0)
    machine = {**linked(25.0, before=6.0), "component": "cache"}
    typed = MachineReading.read(machine)
    b = RunRecord("b", "2026-01-01", {"name": "cpu"}, {}, (replace(across, machine=typed),))
    rows, _, _ = compare_runs(before, b)
    assert rows[0].verdict == "improved" and rows[0].judged_against_bound == "faster", rows[
        0
    ].decision


def test_a_baseline_run_keeps_the_link_only_for_a_check_that_follows_it_in_one_state() -> None:
    steady = {**linked(6.0), "component": "cache"}
    kept = readings.stored(steady, link=True)
    assert kept is not None and kept.rates.link == 6.0 and kept.rates.cache == 100.0
    assert kept.to_dict() == {"cache": 100.0, "link": 6.0, "source": SOURCE, "component": "cache"}
    alone = readings.stored(steady)
    assert alone is not None and alone.rates.link is None, "a check that does not follow it"
    changed = {**linked(6.0, before=25.0), "component": "cache"}
    across = readings.stored(changed, link=True)
    assert across is not None and across.rates.link is None, "measured across two states"


def test_the_prior_sees_each_link_state_of_a_collective_on_its_own() -> None:
    """Runs in two states 2x apart vary little within each: the prior gets both variances."""
    machines = [{"link": v} for v in (25.0, 6.0, 24.0, 5.9, 26.0)]
    assert speed.link_groups(machines) == [[3, 1], [2, 0, 4]]
    assert speed.link_groups([{"link": 6.0}, None]) is None
    runs = [[25.0], [55.0], [25.5], [56.0], [24.5]]
    split = speed.run_variances(runs, machines, higher_is_better=False)
    assert [df for _, df in split] == [1, 2] and all(v < 1e-3 for v, _ in split)
    (whole,) = speed.run_variances(runs, [None] * 5, higher_is_better=False)
    assert whole[1] == 4 and whole[0] > 0.1


def test_a_corrupt_stored_link_rate_is_a_load_error_and_the_file_is_left(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.save("cpu", [collective([25.0, 26.0], 25.0)], "run-1")
    path = tmp_path / "cpu" / "baseline.json"
    data = json.loads(path.read_text())
    (entry,) = data["entries"].values()
    assert entry["runs"][0]["policy"]["machine"]["link"] == 25.0
    entry["runs"][0]["policy"]["machine"]["link"] = "fast"
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(StorageError, match="machine-probe rate"):
        store.load("cpu")
    assert path.read_bytes() == before


def test_a_library_that_will_not_load_is_a_reason_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken toolchain (here: a 'compiler' that writes garbage) gives no library and why."""
    import tempfile

    from perfsuite.measure import native

    fake = tmp_path / "fake-cc"
    fake.write_text(
        '#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\necho "not a library" > "$2"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lib, why = native.build("broken_toolchain_probe", "int f(void) { return 1; }", ("-shared",))
    assert lib is None
    assert why.startswith("could not build broken_toolchain_probe: OSError"), why
    assert not list((tmp_path / f"perfsuite-ref-{os.getuid()}").glob("*.so")), "kept the bad .so"


def test_per_speed_divides_a_rate_and_multiplies_a_latency_by_the_checks_component() -> None:
    reading = {"component": "memory", "memory": 20.0, "cache": 50.0}
    assert speed.per_speed(10.0, reading, higher_is_better=True) == 0.5
    assert speed.per_speed(10.0, reading, higher_is_better=False) == 200.0
    assert speed.per_speed(10.0, {"component": "memory", "memory": 0.0}, True) is None
    assert speed.per_speed(10.0, None, True) is None
