"""Floor grounds and noise flags: typed where decided and stored, worded only by explain.

Each kind is worded as the sentence perfsuite wrote before it was typed, so the terminal
and the HTML report read as they did; a record of an earlier version, which holds the
sentences, still loads and shows them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from perfsuite.model import (
    SCHEMA_VERSION,
    BaselineVerdict,
    Because,
    FlagKind,
    FloorBecause,
    FloorVerdict,
    LinkSubset,
    NoiseFlag,
    Result,
    Why,
)
from perfsuite.report.explain import flag_words, floor_reason, link_note, verdict_reason
from perfsuite.report.html import render
from perfsuite.store.files import write_json_atomic
from perfsuite.store.records import load_record

FIXTURES = Path(__file__).parent / "fixtures"

FLAGS = {
    NoiseFlag(FlagKind.FOREIGN_LOAD, cores=1.304):
        "under foreign load (1.30 cores of other work or steal)",
    NoiseFlag(FlagKind.GPU_THROTTLED, gpu=3,
              throttled=("hardware slowdown", "hardware thermal slowdown")):
        "while gpu:3 was throttled (hardware slowdown, hardware thermal slowdown)",
    NoiseFlag(FlagKind.LINK_CHANGED, link_before=25.04, link=6.123):
        "while the CPUs' link changed state during the measurement (25 to 6.12 M handoffs/s)",
    NoiseFlag(FlagKind.LINK_UNLIKE_BASELINE, link=60.0, baseline_low=5.8, baseline_high=26.0):
        "while the CPUs' link ran at 60 M handoffs/s, another state than in every baseline "
        "run (5.8-26)",
    NoiseFlag(FlagKind.MACHINE_MOVED, ratio=0.7, component="memory"):
        "while the machine itself ran -30% against its baseline runs (framework-free memory "
        "probe)",
    NoiseFlag(FlagKind.TIMER_UNLIKE_BASELINE, timer="C loop", baseline_timers=("mpi4py loop",)):
        "with another timer than every baseline run (C loop; the baseline's: mpi4py loop): "
        "save a new baseline to compare like with like",
    NoiseFlag(FlagKind.OTHER, text="while a hook said so"): "while a hook said so",
}  # fmt: skip

FLOORS = {
    FloorVerdict("no-reference", because=FloorBecause.NO_REFERENCE):
        "the check has no reference figure",
    FloorVerdict("no-reference", because=FloorBecause.NO_REFERENCE,
                 note="batch 8 < 32: judged against its baseline only"):
        "batch 8 < 32: judged against its baseline only",
    FloorVerdict("no-reference", figure="memory.bandwidth_gbs",
                 because=FloorBecause.OTHER_DEVICE, profile="slowgpu", profile_kind="gpu",
                 device_kind="cpu"):
        "profile 'slowgpu' describes a gpu; it has no memory.bandwidth_gbs for a cpu "
        "measurement",
    FloorVerdict("no-reference", figure="roofline",
                 because=FloorBecause.PROFILE_LACKS_FIGURE, profile="devcpu",
                 missing=("compute.fp32_tflops", "memory.bandwidth_gbs")):
        "profile 'devcpu' has no compute.fp32_tflops, memory.bandwidth_gbs",
    FloorVerdict("no-reference", because=FloorBecause.OTHER, note="as an old record said"):
        "as an old record said",
    FloorVerdict("pass", value=1.0, peak=1.0): "",
}  # fmt: skip


def test_every_flag_kind_is_worded_as_before() -> None:
    assert {f.kind for f in FLAGS} == set(FlagKind)
    for flag, words in FLAGS.items():
        assert flag_words(flag) == words


def test_every_floor_ground_is_worded_as_before() -> None:
    assert {f.because for f in FLOORS} == {*FloorBecause, None}
    for floor, words in FLOORS.items():
        assert floor_reason(floor) == words


def test_a_noisy_verdict_and_a_link_note_word_their_flags() -> None:
    flags = list(FLAGS)
    load, link = flags[0], flags[3]
    verdict = BaselineVerdict(
        "noisy", ratio=0.8, tolerance=0.05, ci_low=0.75, ci_high=0.85, p_value=0.001,
        why=Why(Because.NOISE_FLAGS), noise_flags=(load,),
    )  # fmt: skip
    assert verdict_reason(verdict).endswith(f"but measured {FLAGS[load]}")
    bound = replace(verdict, judged_against_bound="slower", bound_because=link)
    assert f"but measured {FLAGS[load]}; {FLAGS[link]}; against" in verdict_reason(bound)
    note = link_note(LinkSubset(2, 5, "slower", link))
    assert note.startswith(f"measured {FLAGS[link]}, so compared with the 2 of 5 baseline runs")


def typed(result: Result) -> Result:
    """A result with one of every typed ground and flag."""
    flags = tuple(FLAGS)
    floor = replace(list(FLOORS)[3], value=result.floor.value)
    baseline = replace(
        result.baseline, noise_flags=flags[3:], judged_against_bound="slower",
        bound_because=flags[3],
    )  # fmt: skip
    facts = replace(result.facts, link_state=LinkSubset(2, 5, "slower", flags[3]))
    return replace(
        result, floor=floor, baseline=baseline, facts=facts, noise_flags=flags[:2],
        noise=replace(result.noise, foreign_cores=1.304),
    )  # fmt: skip


def test_typed_grounds_and_flags_round_trip_through_a_record(tmp_path: Path) -> None:
    run = load_record(FIXTURES / "report-run.json")
    result = typed(run.results[0])
    path = write_json_atomic(
        tmp_path / "devcpu" / "run.json", replace(run, results=(result,)).to_dict()
    )
    stored = json.loads(path.read_text())["results"][0]
    assert stored["noise"]["flags"][0] == {"kind": "foreign-load", "cores": 1.304}
    assert stored["floor"]["because"] == "profile-lacks-figure"
    again = load_record(path).results[0]
    assert again.noise_flags == result.noise_flags
    assert again.baseline.noise_flags == result.baseline.noise_flags
    assert again.baseline.bound_because == result.baseline.bound_because
    assert again.floor == result.floor and again.facts.link_state == result.facts.link_state


def test_a_version_2_record_keeps_its_sentences(tmp_path: Path) -> None:
    """Its floor reason and flags were words: read as OTHER, shown as they were."""
    data = json.loads((FIXTURES / "report-baseline.json").read_text())
    assert data["schema_version"] == 2 < SCHEMA_VERSION
    raw = data["results"][0]
    raw["floor"] = {"verdict": "no-reference", "reason": "profile 'devcpu' has no roofline"}
    raw["noise"]["flags"] = ["under foreign load (1.30 cores of other work or steal)"]
    raw["baseline"]["noise_flags"] = ["while the machine itself ran -30% against its runs"]
    raw["baseline"]["bound_because"] = "while the CPUs' link ran at 60 M handoffs/s"
    raw["context"]["link_state"] = {"baseline_runs": 2, "of": 5, "bound": "slower",
                                    "state": "while the CPUs' link ran at 60 M handoffs/s"}  # fmt: skip
    path = tmp_path / "devcpu" / "old.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    record = load_record(path)
    r = record.results[0]
    assert r.floor.because is FloorBecause.OTHER
    assert floor_reason(r.floor) == "profile 'devcpu' has no roofline"
    assert r.noise_flags == (
        NoiseFlag(FlagKind.OTHER, text="under foreign load (1.30 cores of other work or steal)"),
    )
    assert [flag_words(f) for f in r.baseline.noise_flags] == [
        "while the machine itself ran -30% against its runs"
    ]
    link = "while the CPUs' link ran at 60 M handoffs/s"
    assert r.baseline.bound_because == NoiseFlag(FlagKind.OTHER, text=link)
    assert r.facts.link_state == LinkSubset(2, 5, "slower", NoiseFlag(FlagKind.OTHER, text=link))
    page = render(record)
    assert "profile &#39;devcpu&#39; has no roofline" in page
    assert "under foreign load (1.30 cores of other work or steal)" in page
    assert load_record(write_json_atomic(tmp_path / "devcpu" / "new.json", record.to_dict())) == (
        replace(record, schema_version=SCHEMA_VERSION)
    )


@pytest.mark.parametrize("flags", ["x", ["x", 1], [{"kind": "sideways"}]])
def test_a_malformed_stored_flag_is_refused(tmp_path: Path, flags: object) -> None:
    from perfsuite.errors import StorageError

    data = json.loads((FIXTURES / "report-run.json").read_text())
    data["results"][0]["noise"]["flags"] = flags
    path = tmp_path / "devcpu" / "bad.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match=r"noise\.flags"):
        load_record(path)
