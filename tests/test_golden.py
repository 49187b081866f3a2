"""The golden set: what the commands make of fixed records stays what it was.

``tests/golden/records`` holds CPU run records, the committed H100 and H200 records, A/B
records (which ``history`` names and skips) and a synthetic fleet; ``tests/golden/expected``
holds what ``compare``, ``report``, ``history`` and ``fleet report`` printed and wrote from
them, paths named rather than spelled.  A refactoring passes this unchanged; a change meant
to change the output regenerates it (``python -m tests.golden.outputs``) and shows the diff.
"""

from __future__ import annotations

import difflib
import fcntl
import json
import os
from pathlib import Path

import pytest

from tests.golden.outputs import EXPECTED, outputs


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The outputs, made once a session: under xdist the first worker makes them (10 s)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return outputs(tmp_path_factory.mktemp("golden"))
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker
    cache = shared / "golden-outputs.json"
    with open(str(cache) + ".lock", "w") as lock:  # the first worker makes them, the other waits
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cache.exists():
            cache.write_text(json.dumps(outputs(tmp_path_factory.mktemp("golden"))))
        made: dict[str, str] = json.loads(cache.read_text())
    return made


def test_the_commands_make_the_same_files(made: dict[str, str]) -> None:
    assert sorted(made) == sorted(p.name for p in EXPECTED.iterdir())


@pytest.mark.parametrize("name", sorted(p.name for p in EXPECTED.iterdir()))
def test_each_output_is_unchanged(made: dict[str, str], name: str) -> None:
    expected = (EXPECTED / name).read_text()
    got = made.get(name, "")
    if got != expected:
        diff = difflib.unified_diff(
            expected.splitlines(), got.splitlines(), f"expected/{name}", "now", lineterm="", n=1
        )
        pytest.fail("\n".join(list(diff)[:40]) + "\n(python -m tests.golden.outputs rewrites it)")


def test_the_golden_records_are_where_the_outputs_say() -> None:
    records = Path(__file__).parent / "golden" / "records"
    assert {p.name for p in records.iterdir()} >= {"h100-sxm", "h200", "fleet", "devcpu"}
