"""Property-based fuzzing of what ``perfsuite ab`` reads of a side (issue 63, must-be-true 9).

A side is a process of another stack; its files are input.  After a side ends, ab reads its
folder (:func:`perfsuite.ab.launch.read_side`: the run record, else the trace of the checks it
started), and after round 1 its output's error line (:func:`perfsuite.ab.run.error_line`).
Hypothesis mutates a valid side record (a value of another kind at any place in its JSON
tree, or the key removed), cuts it short or replaces it with bytes, and writes traces of
garbage.  The documented behaviour: a reading always comes back (``read_side`` never
raises; a record it cannot use is the side's failure, in one printable line), and evidence
comes back only with finite samples and string ids.  ``--hypothesis-show-statistics`` gives
the example counts.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="pip install 'perfsuite[dev]' (Hypothesis) to fuzz")
import test_fuzz_loaders as loaders
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsuite.ab import launch
from perfsuite.ab import run as ab_run

# The record, its mutations and the hostile values of the stored-file fuzzing, plus NaN and
# the infinities: a side may write them (Python's json does by default).
hostile = st.one_of(loaders.hostile, st.floats())
RECORD_PATHS = loaders.RECORD_PATHS
FUZZ_EXAMPLES = loaders.FUZZ_EXAMPLES


def mutated(where: tuple[Any, ...], value: Any, delete: bool) -> Any:
    """The fixture record with ``value`` at ``where`` (or the key removed)."""
    return loaders.mutated(loaders.RECORD, where, value, delete)


def _side_folder(tmp: Path, record: bytes | None, trace: bytes) -> Path:
    where = tmp / "round-01-B"
    shutil.rmtree(where, ignore_errors=True)
    if record is not None:
        (where / "records" / "cpu").mkdir(parents=True)
        (where / "records" / "cpu" / "run.json").write_bytes(record)
    where.mkdir(parents=True, exist_ok=True)
    (where / launch.TRACE_FILE).write_bytes(trace)
    return where


def _assert_valid(got: launch.SideReading) -> None:
    """What the rounds rely on in a reading."""
    assert isinstance(got.failed, str) and "\n" not in got.failed
    assert all(ch.isprintable() for ch in got.failed), repr(got.failed)
    assert all(isinstance(c, str) for c in got.crashed)
    if got.failed:
        assert not got.readings
    for check, reading in got.readings.items():
        assert isinstance(check, str)
        assert isinstance(reading.unit, str)
        assert reading.samples and all(
            isinstance(x, float | int) and math.isfinite(x) for x in reading.samples
        )
        assert math.isfinite(reading.median)


trace_lines = st.one_of(
    st.builds(
        lambda kind, nodeid: json.dumps({kind: nodeid}),
        st.sampled_from(["start", "end", "other"]),
        st.one_of(st.text(max_size=12), st.integers(), st.none()),
    ),
    st.text(max_size=30),
)
traces = st.lists(trace_lines, max_size=8).map(lambda lines: "\n".join(lines).encode())


@settings(
    max_examples=FUZZ_EXAMPLES * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    where=st.sampled_from(RECORD_PATHS),
    value=hostile,
    delete=st.booleans(),
    trace=traces,
    returncode=st.one_of(st.none(), st.integers(-64, 255)),
)
def test_a_mutated_side_record_reads_as_evidence_or_the_sides_failure(
    tmp_path: Path,
    where: tuple[Any, ...],
    value: Any,
    delete: bool,
    trace: bytes,
    returncode: int | None,
) -> None:
    record = json.dumps(mutated(where, value, delete), allow_nan=True).encode()
    folder = _side_folder(tmp_path, record, trace)
    _assert_valid(launch.read_side(folder, returncode, returncode is None, 8.0))


@settings(
    max_examples=FUZZ_EXAMPLES * 2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    record=st.one_of(
        st.none(),
        st.binary(max_size=200),
        st.integers(0, 4000).map(lambda n: json.dumps(loaders.RECORD).encode()[:n]),
    ),
    trace=st.one_of(traces, st.binary(max_size=200)),
    returncode=st.one_of(st.none(), st.integers(-64, 255)),
)
def test_a_side_that_wrote_garbage_or_nothing_reads_as_its_failure(
    tmp_path: Path, record: bytes | None, trace: bytes, returncode: int | None
) -> None:
    folder = _side_folder(tmp_path, record, trace)
    got = launch.read_side(folder, returncode, returncode is None, 8.0)
    _assert_valid(got)
    if record is None or returncode is None:
        assert got.failed  # no record, or killed: never evidence


@settings(max_examples=FUZZ_EXAMPLES * 3, deadline=None)
@given(text=st.text(max_size=300))
def test_a_trace_names_only_started_unfinished_printable_checks(text: str) -> None:
    named = launch.unfinished(text)
    assert all(isinstance(n, str) and n and n.isprintable() for n in named)
    assert len(set(named)) == len(named)
    started = {
        e["start"]
        for line in text.splitlines()
        for e in [_json(line)]
        if isinstance(e, dict) and isinstance(e.get("start"), str)
    }
    assert set(named) <= started


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


@settings(max_examples=FUZZ_EXAMPLES * 3, deadline=None)
@given(output=st.text(max_size=400), limit=st.integers(10, 400))
def test_a_sides_error_line_is_one_printable_line_within_its_limit(output: str, limit: int) -> None:
    line = ab_run.error_line(output, limit)
    assert "\n" not in line and "\r" not in line
    assert all(ch.isprintable() for ch in line), repr(line)
    assert len(line) <= limit
