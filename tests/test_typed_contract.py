"""The result's typed contract (record schema 4): what the rooms exchange is typed fields.

A check's own description stays in ``context`` and reaches the record whole, whatever its
keys; the timer, expectations, measuring policy, bare reference and machine reading are
fields of the result, and a record of schema 1-3 is read with them moved out of ``context``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

from perfsuite.hardware.profile import HardwareProfile
from perfsuite.judge.verdict import Judge
from perfsuite.measure.loop import Expectation, Measurement, Workload
from perfsuite.model import (
    SCHEMA_VERSION,
    BareReference,
    BaselineFacts,
    LoadCancelled,
    MachineReading,
    MeasuringPolicy,
    Result,
    RunRecord,
    Work,
    upgraded,
)
from perfsuite.model.rules import Tolerances
from perfsuite.settings import Settings
from perfsuite.store.baseline import BaselineStore
from perfsuite.store.records import load_record

CPU = HardwareProfile("cpu-x", "", "cpu", "host", figures={}, estimated=frozenset())


def _judged(tmp_path: Path, context: dict[str, object]) -> Result:
    judge = Judge(
        Settings(),
        CPU,
        BaselineStore(tmp_path).load("cpu-x"),
        Tolerances(),
        [],
        dt.date(2026, 1, 1),
    )
    step = Workload(
        check="train_step", params={"device": "cpu"}, metric="step", unit="steps/s",
        work=Work(1.0, "steps"), run=lambda: None, context=context,
        expectations=(Expectation("flops", False, "counted 2x the model's"),),
    )  # fmt: skip
    bare = {"what": "matmul", "value": 4.0, "unit": "steps/s", "samples": [4.0, 3.9],
            "calls_per_sample": 1, "warmup_s": 0.1, "paired": False}  # fmt: skip
    measured = Measurement(seconds=(0.5, 0.5), values=(2.0, 2.0), timer="perf_counter", bare=bare)
    plan = judge.plan("t.py::test_step", step, None)
    machine = {"memory": 10.0, "cache": 20.0, "source": "probe"}
    return judge.judge("t.py::test_step", step, measured, plan, machine=machine)


def test_a_check_s_precision_policy_survives_into_the_record(tmp_path: Path) -> None:
    """A TensorFlow step's ``policy`` once lost to the judge's own: now both are kept."""
    result = _judged(tmp_path, {"policy": "mixed_float16", "precision_policy": "mixed_float16"})
    data = json.loads(json.dumps(result.to_dict()))
    assert data["context"] == {"policy": "mixed_float16", "precision_policy": "mixed_float16"}
    assert data["policy"]["repetitions"] == 2 and data["policy"]["mode"]  # the measuring one
    again = Result.from_dict(data)
    assert again.context["policy"] == "mixed_float16"
    assert isinstance(again.policy, MeasuringPolicy) and again.policy == result.policy


def test_a_check_s_own_context_key_never_collides_with_the_verdict_s_facts(
    tmp_path: Path,
) -> None:
    """The facts a comparison rested on are a field of their own, not keys of ``context``."""
    result = _judged(tmp_path, {"passes": 4, "load_cancelled": "the check's own words"})
    facts = BaselineFacts(baseline_span_s=0.0, load_cancelled=LoadCancelled(0.9, 3, 3))
    data = json.loads(json.dumps(replace(result, facts=facts).to_dict()))
    assert data["context"] == {"passes": 4, "load_cancelled": "the check's own words"}
    assert data["facts"]["load_cancelled"]["cores"] == 0.9
    again = Result.from_dict(data)
    assert again.context["passes"] == 4 and again.facts == facts
    # A record written before the field kept the facts in ``context``: still read.
    old = {**data, "context": {"layers": 3, **data["facts"]}}
    del old["facts"]
    before = Result.from_dict(old)
    assert before.context == {"layers": 3} and before.facts == facts


def test_the_judge_fills_the_typed_fields(tmp_path: Path) -> None:
    result = _judged(tmp_path, {"layers": 3})
    assert result.timer == "perf_counter" and result.tolerance_from == "option"
    assert [(e.name, e.passed) for e in result.expectations] == [("flops", False)]
    assert result.outcome == "fail"  # a failed expectation, read from the typed field
    assert isinstance(result.bare_reference, BareReference)
    assert result.bare_reference.value == 4.0
    assert isinstance(result.machine, MachineReading) and result.machine.component == "cache"
    assert result.machine.rates.memory == 10.0 and result.machine.source == "probe"
    assert result.policy is not None and result.policy.calls_per_sample == 1
    assert Result.from_dict(result.to_dict()) == result


def test_a_schema_3_record_is_read_with_its_context_keys_moved_out(tmp_path: Path) -> None:
    result = _judged(tmp_path, {"layers": 3})
    data = RunRecord("r1", "2026-01-01T00:00:00+00:00", {"name": "cpu-x"}, {}, (result,)).to_dict()
    assert data["schema_version"] == SCHEMA_VERSION == 4
    old = dict(data, schema_version=3)
    moved = ("timer", "tolerance_from", "expectations", "policy", "bare_reference", "machine")
    r = dict(old["results"][0])
    r["context"] = {**r["context"], **{k: r.pop(k) for k in moved}}
    old["results"] = [r]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = load_record(path)
    assert loaded.results[0] == result
    assert upgraded(old)["results"][0]["context"] == {"layers": 3}


def test_the_machine_reading_is_typed_and_reads_hostile_values_as_missing() -> None:
    stored = {
        "memory": 25.0, "cache": "fast", "compute": float("nan"), "link": 10**400,
        "source": "probe", "component": "memory", "before": [1, 2], "after": {"link": 6.0},
    }  # fmt: skip
    reading = MachineReading.read(stored)
    assert reading is not None and reading.own_rate() == 25.0
    assert reading.rate("cache") is None and reading.rate("compute") is None
    assert reading.rate("link") is None, "past a float's range: no rate"
    assert reading.rate("memory", source="another probe") is None
    assert reading.before is None and reading.after is not None and reading.after.link == 6.0
    assert MachineReading.read([25.0]) is None and MachineReading.read(None) is None
    text = json.dumps(reading.to_dict())
    again = MachineReading.read(json.loads(text))
    assert again is not None and json.dumps(again.to_dict()) == text
