"""Unit tests: per-profile tolerances and waivers files."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from perfsuite.errors import StorageError
from perfsuite.judge import waivers
from perfsuite.judge.tolerances import resolve
from perfsuite.store.rules import load_tolerances, load_waivers

ID = "suites/test_memory_bandwidth.py::test_stream[numpy-cpu-triad]"


def test_tolerance_precedence(tmp_path: Path) -> None:
    assert resolve(load_tolerances(tmp_path), ID, None, 0.05) == (0.05, "option")
    assert resolve(load_tolerances(tmp_path), ID, 0.2, 0.05) == (0.2, "marker")
    (tmp_path / "tolerances.toml").write_text(
        'schema_version = 1\ndefault = 0.08\n[checks]\n"*numpy-*" = 0.12\n"*numpy-cpu-triad*" = 0.15\n'
    )
    tol = load_tolerances(tmp_path)
    assert resolve(tol, ID, 0.2, 0.05)[0] == 0.15, (
        "the longest matching pattern wins over the marker"
    )
    other = "suites/test_gemm.py::test_gemm[fp32]"
    assert resolve(tol, other, 0.2, 0.05) == (0.2, "marker")
    assert resolve(tol, other, None, 0.05)[0] == 0.08


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("default = 0.1\n", "'schema_version' must be 1"),
        (
            "schema_version = 1\ndefault = 5\n",
            "'default' must be a fraction between 0 and 1, got 5",
        ),
        ("schema_version = 1\ncolour = 1\n", "unknown key(s) colour"),
        ("schema_version = 1\n[checks]\n'x' = -0.1\n", "'checks.x' must be a fraction"),
        ("schema_version = 1\ndefault = \n", "malformed tolerances file"),
    ],
)
def test_malformed_tolerances(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "tolerances.toml").write_text(text)
    with pytest.raises(StorageError) as info:
        load_tolerances(tmp_path)
    assert message in str(info.value) and str(tmp_path / "tolerances.toml") in str(info.value)


WAIVERS = """\
schema_version = 1

[[waiver]]
test = "*tensorflow-cpu-*"
reason = "XLA CPU regression, tracked upstream"
expires = 2026-12-31

[[waiver]]
test = "*numpy-*"
reason = "kernel update"
"""


def test_waivers_load_match_and_expire(tmp_path: Path) -> None:
    (tmp_path / "waivers.toml").write_text(WAIVERS)
    loaded = load_waivers(tmp_path)
    assert [(w.test, w.line) for w in loaded] == [("*tensorflow-cpu-*", 3), ("*numpy-*", 8)]
    tf = waivers.find(loaded, "s.py::test_stream[tensorflow-cpu-copy]")
    assert tf is not None and tf.expires == dt.date(2026, 12, 31)
    assert not tf.expired(dt.date(2026, 12, 30)) and tf.expired(dt.date(2026, 12, 31))
    assert waivers.find(loaded, "s.py::test_stream[numpy-cpu-copy]").expires is None
    assert waivers.find(loaded, "s.py::test_gemm") is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace('reason = "kernel update"\n', ""),
            ":8: [[waiver]] needs a non-empty 'reason'",
        ),
        (
            lambda t: t.replace("expires = 2026-12-31", 'expires = "soon"'),
            ":3: 'expires' must be a date",
        ),
        (
            lambda t: t.replace('test = "*numpy-*"', 'test = "*numpy-*"\nowner = "me"'),
            ":8: unknown key(s) owner",
        ),
        (
            lambda t: t.replace("expires = 2026-12-31", "expires = 2026-13-01"),
            "malformed waivers file",
        ),
    ],
)
def test_malformed_waivers_name_the_line(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "waivers.toml"
    path.write_text(edit(WAIVERS))
    with pytest.raises(StorageError) as info:
        load_waivers(tmp_path)
    assert str(path) in str(info.value) and message in str(info.value)
