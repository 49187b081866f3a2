"""``lab/spread.py`` reads run records through perfsuite's own loader."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from lab import spread
from perfsuite.store.records import load_record

FIXTURE = Path(__file__).parent / "fixtures" / "run-record-v1.json"


def test_spread_reads_each_checks_median_per_record() -> None:
    medians: dict[str, list[float]] = defaultdict(list)
    adjusted: dict[str, list[float]] = defaultdict(list)
    units: dict[str, str] = {}
    spread.read_records([FIXTURE, FIXTURE], medians, units, adjusted)
    record = load_record(FIXTURE)
    assert set(medians) == {r.id for r in record.results}
    for result in record.results:
        assert medians[result.id] == [float(np.median(result.samples))] * 2
        assert units[result.id] == result.unit


def test_spread_refuses_a_file_that_is_not_a_run_record(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": "none"}')
    with pytest.raises(SystemExit, match=r"not a readable run record: .*bad\.json"):
        spread.read_records([bad], {}, {}, {})
