"""Property-based fuzzing of the fleet's readers (issue 63, must-be-true 9).

Each reader gets hostile input and must either return a valid value or raise its documented
error, never anything else: node labels (``is_label``, ``from_host``, ``parse_nodelist``:
FleetError), hostfiles (``read_hostfile``: FleetError), fleet digests (``check_digest``:
ValueError, and ``parse_record``, which makes a malformed digest again from its record),
a run record read for a fleet (``aggregate.digest``: StorageError) and a task's status
(``NodeStatus.from_dict``: StorageError).  Run with ``--hypothesis-show-statistics`` for
the number of examples per reader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="pip install 'perfsuite[dev]' (Hypothesis) to fuzz")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fleet import result, write_record
from test_fuzz_loaders import hostile as loaders_hostile
from test_fuzz_loaders import mutated as mutated_at
from test_fuzz_loaders import paths

from perfsuite.errors import StorageError
from perfsuite.fleet import aggregate
from perfsuite.fleet.labels import from_host, is_label, printable
from perfsuite.fleet.run import FleetError, parse_nodelist, read_hostfile
from perfsuite.fleet.status import NodeStatus

FUZZ_EXAMPLES = int(os.environ.get("PERFSUITE_FUZZ_EXAMPLES", "20"))
SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Characters that matter to a shell, a drain loop, a terminal or a page, and ordinary ones.
SHARP = "\n\r\t\x0b\x0c\x1c\x1b\x00 ,;:#$`'\"<>&|()[]{}*?!\\/.-_\u202e\u00e9\u0663"
label_text = st.text(alphabet=st.sampled_from(list(SHARP) + list("abnode0179-tT.")), max_size=40)
# The loaders' hostile values, and texts that matter to labels.
hostile = st.one_of(
    loaders_hostile,
    label_text,
    st.sampled_from(["", "node17\nnode03", "node17,node02", "\x1b[31mx", "<b>x</b>"]),
    st.sampled_from([float("nan"), float("inf")]),
)


@st.composite
def mutated(draw: st.DrawFn, tree: Any) -> Any:
    """``tree`` with one place given a hostile value, or its key removed."""
    where = draw(st.sampled_from(paths(tree)))
    delete = draw(st.booleans()) and draw(st.booleans())
    return mutated_at(tree, where, draw(hostile), delete)


# ----------------------------------------------------------------------------- node labels


@SETTINGS
@given(text=st.one_of(label_text, st.text(max_size=300)))
def test_fuzz_labels(text: str) -> None:
    """A label passes only in hostname grammar; from_host always makes one that passes."""
    if is_label(text):
        assert text.isascii() and text.isprintable() and len(text) <= 253
        assert not set(text) & set(" ,;:#$`'\"<>&|()[]{}*?!\\/_\n")
        assert text[0].isalnum() and text[-1].isalnum()
    assert is_label(from_host(text))
    assert printable(text).isprintable()


@SETTINGS
@given(text=st.one_of(label_text, st.lists(label_text, max_size=4).map(",".join)))
def test_fuzz_nodelist(text: str) -> None:
    """--nodelist: host names that each pass, once each; or a FleetError."""
    try:
        names = parse_nodelist(text)
    except FleetError as exc:
        assert str(exc).isprintable()
        return
    assert names and all(is_label(n) for n in names) and len(set(names)) == len(names)


# ----------------------------------------------------------------------------- hostfiles

hostfile_lines = st.lists(
    st.one_of(
        label_text,
        st.tuples(label_text, st.integers(-2, 99)).map(lambda t: f"{t[0]}:{t[1]}"),
        st.sampled_from(["# comment", "", "node01 # gpu", "node02:4", "  node03\t"]),
    ),
    max_size=6,
)


@SETTINGS
@given(content=st.one_of(st.binary(max_size=200), hostfile_lines.map("\n".join)))
def test_fuzz_hostfile(content: bytes | str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A hostfile gives host names that each pass, each host once, or a one-line FleetError."""
    path = tmp_path_factory.mktemp("hosts") / "hosts"
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    try:
        hosts = read_hostfile(path)
    except FleetError as exc:
        assert "\n" not in str(exc) and str(exc).isprintable()
        return
    assert hosts and all(is_label(h) for h in hosts)
    short = [h.split(".")[0] for h in hosts]
    assert len(set(short)) == len(short), hosts  # one label per task: each host once


# ----------------------------------------------------------------------------- digests


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GPU node's run record (two GPUs and a CPU check), as the fleet reads it."""
    gpus: list[dict[str, object]] = [{"index": g, "uuid": f"GPU-{g}"} for g in range(2)]
    results = [result(f"test_stream[torch-gpu:{g}-copy]", 3000.0) for g in range(2)]
    results.append(result("test_latency[8B]", 5.0, higher_is_better=False))
    return write_record(tmp_path_factory.mktemp("fleet"), "node01", results, gpus=gpus)


@SETTINGS
@given(data=st.data())
def test_fuzz_digest(data: st.DataObject, record: Path) -> None:
    """A digest passes check_digest only when the report can use it; else ValueError.

    Pinned beside its record, a digest that does not pass is made again from the record:
    the rows are the record's, never a traceback.
    """
    good = aggregate.digest(record)
    d = data.draw(mutated(good))
    try:
        aggregate.check_digest(d)
        valid = True
    except ValueError:
        valid = False
    if valid:
        rows = aggregate._rows_of(d, str(record), aggregate._Keys())
        assert all(is_label(r.unit.label) for r in rows)
    aggregate.digest_path(record).write_text(json.dumps(d))
    try:
        rows = aggregate.parse_record(record, aggregate._Keys())
    finally:
        aggregate.digest_path(record).unlink(missing_ok=True)
    assert rows and all(is_label(r.unit.label) for r in rows)
    if not valid:
        assert {r.unit.label for r in rows} == {"node01"}


@SETTINGS
@given(data=st.data())
def test_fuzz_record_for_a_fleet(
    data: st.DataObject, record: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A mutated run record gives a digest that passes check_digest, or a StorageError."""
    bad = data.draw(mutated(json.loads(record.read_text())))
    path = tmp_path_factory.mktemp("record") / "r.json"
    path.write_text(json.dumps(bad))
    try:
        d = aggregate.digest(path)
    except StorageError as exc:
        assert str(exc).isprintable()
        return
    aggregate.check_digest(d)


# ----------------------------------------------------------------------------- task statuses

STATUS = NodeStatus(3, "node03-t1", "node03.cluster", failed="timed out", exit_code=-9,
                    seconds=1.5, log="/x/task-3.log", output_tail="line\nline").to_dict()  # fmt: skip


@SETTINGS
@given(data=st.data())
def test_fuzz_task_status(data: st.DataObject) -> None:
    """A task's status: labels and hosts that pass (or empty), printable texts; or StorageError."""
    bad = data.draw(mutated(STATUS))
    try:
        s = NodeStatus.from_dict(bad)
    except StorageError as exc:
        assert str(exc).isprintable()
        return
    assert s.label == "" or is_label(s.label)
    assert s.host == "" or is_label(s.host)
    assert all(t.isprintable() for t in (s.failed, s.log, s.record))
    assert printable(s.output_tail, "\n\t") == s.output_tail
    assert 0 <= s.task and 0 <= s.seconds < float("inf")
