"""``perfsuite history``: change points, attribution, outputs and exit statuses.

Series are synthetic with fixed seeds; run records are the committed fixture with its
medians and environment rewritten night by night.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsuite.cli import main
from perfsuite.judge import changepoints as cps
from perfsuite.judge.outcome import EXIT_OK, EXIT_REGRESSED, EXIT_USAGE
from perfsuite.report import history_text
from perfsuite.report.history_text import NOTHING_CHANGED as NOTHING
from perfsuite.report.history_text import attribution_lines
from perfsuite.store.files import write_json_atomic
from perfsuite.store.records import load_record

FIXTURE = Path(__file__).parent / "fixtures" / "run-a-tf220.json"
PROFILE = "cpu-amd-epyc-2c"
NUMPY = "test_stream[numpy-cpu-triad]"


def flat(n: int, cv: float = 0.01, seed: int = 1) -> np.ndarray:
    return 100.0 * np.random.default_rng(seed).lognormal(0, cv, n)


# --- the detector --------------------------------------------------------------------------


def test_one_bad_night_is_an_outlier_never_two_changes() -> None:
    values = flat(60)
    values[30] *= 0.6  # run 31 at -40%
    scan = cps.scan(values, higher_is_better=True, min_effect=0.02)
    assert scan.outliers == (30,)
    assert cps.significant([scan]) == [[]]


def test_two_bad_nights_in_a_row_are_outliers_too() -> None:
    values = flat(60, seed=2)
    values[20:22] *= 0.7
    scan = cps.scan(values, higher_is_better=True, min_effect=0.02)
    assert scan.outliers == (20, 21)
    assert cps.significant([scan]) == [[]]


@pytest.mark.parametrize("at", [0, 1, 2])
def test_an_outlier_among_the_first_runs_makes_no_change(at: int) -> None:
    values = flat(40, seed=3)
    values[at] *= 0.6
    assert cps.detect(values, higher_is_better=True, min_effect=0.02) == []


def test_a_one_run_intermediate_value_at_a_step_adds_no_phantom_change() -> None:
    values = [50.0] * 14 + [74.0] + [100.0] * 15  # MongoDB's finds_ahead
    found = cps.detect(values, higher_is_better=True, min_effect=0.02)
    assert [c.index for c in found] == [15]


def test_a_step_is_one_change_with_its_direction_size_and_interval() -> None:
    values = flat(80, cv=0.03, seed=4)
    values[40:] *= 0.9
    (change,) = cps.detect(values, higher_is_better=True, min_effect=0.02)
    assert change.index == 40
    assert change.direction == "regressed"
    assert change.low < change.ratio < change.high
    assert change.low < 0.9 < change.high
    assert change.p_value < 1e-6
    # The same readings as times (lower is better): an improvement.
    (change,) = cps.detect(values, higher_is_better=False, min_effect=0.02)
    assert change.direction == "improved" and change.ratio > 1


def test_a_change_below_the_minimum_effect_is_not_reported() -> None:
    values = flat(100, cv=0.002, seed=5)
    values[50:] *= 0.985  # clearly significant at this spread, but 1.5%
    assert cps.detect(values, higher_is_better=True, min_effect=0.02) == []
    assert len(cps.detect(values, higher_is_better=True, min_effect=0.01)) == 1


def test_no_change_series_rarely_alarm_and_the_family_is_corrected() -> None:
    rng = np.random.default_rng(6)
    scans = [
        cps.scan(100 * rng.lognormal(0, 0.03, 120), higher_is_better=True, min_effect=0.02)
        for _ in range(20)
    ]
    assert sum(map(bool, cps.significant(scans))) <= 2


def test_the_cost_is_about_linear_in_the_length() -> None:
    # 10,000 runs: a quadratic fit would not finish in a test's time; the scan is cheap.
    values = flat(10_000, cv=0.03, seed=7)
    values[5_000:] *= 0.9
    found = cps.detect(values, higher_is_better=True, min_effect=0.02)
    assert [c.index for c in found] == [5_000]


def test_nights_to_detect_grow_with_the_spread_and_shrink_with_the_step() -> None:
    noisy = [cps.nights_to_detect(0.12, d, before=60, min_effect=0.02) for d in (0.1, 0.2)]
    assert noisy[0] is not None and noisy[1] is not None and noisy[0] > noisy[1] > 2
    assert cps.nights_to_detect(0.007, 0.05, before=60, min_effect=0.02) == cps.MIN_SEGMENT
    assert cps.nights_to_detect(0.12, 0.05, before=60, min_effect=0.02) is None
    assert cps.nights_to_detect(0.01, 0.015, before=60, min_effect=0.02) is None


# --- run records on disk -------------------------------------------------------------------


def write_nights(
    root: Path,
    levels: Sequence[float],
    *,
    numpy_versions: Sequence[str] | None = None,
    skip_numpy_before: int = 0,
    cv: float = 0.01,
) -> Path:
    """A profile's nightly run records, numpy's check at ``levels`` (tensorflow's flat)."""
    record = load_record(FIXTURE)
    rng = np.random.default_rng(11)
    for night, level in enumerate(levels):
        results = []
        for r in record.results:
            if "numpy" in r.id and night < skip_numpy_before:
                continue
            base = level if "numpy" in r.id else 40.0
            median = float(base * rng.lognormal(0, cv))
            results.append(replace(r, summary=replace(r.summary, median=median)))
        env: dict[str, Any] = json.loads(json.dumps(record.environment))
        if numpy_versions is not None:
            env["software"]["numpy"]["version"] = numpy_versions[night]
        run = replace(
            record,
            run_id=f"2026{night:04d}-night",
            created=f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T03:00:00+00:00",
            environment=env,
            results=tuple(results),
        )
        write_json_atomic(root / PROFILE / f"2026{night:04d}-night.json", run.to_dict())
    return root


def history_json(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["history", "--report-dir", str(root), "--json", *extra])
    return code, json.loads(out.getvalue())


def check(doc: dict[str, Any], text: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if text in c["id"])


def test_a_regression_is_attributed_to_the_package_that_changed_that_night(
    tmp_path: Path,
) -> None:
    versions = ["2.4.6"] * 30 + ["2.5.0"] * 30
    root = write_nights(tmp_path, [40.0] * 30 + [34.0] * 30, numpy_versions=versions)
    code, doc = history_json(root)
    assert code == EXIT_REGRESSED
    assert (
        doc["schema_version"] == history_text.JSON_SCHEMA_VERSION and doc["verdict"] == "regressed"
    )
    (change,) = check(doc, "numpy")["changes"]
    assert change["run"] == 31 and change["direction"] == "regressed"
    assert change["ratio"] == pytest.approx(0.85, abs=0.02)
    why = change["attribution"]
    assert why["changes"] == [{"key": "software.numpy.version", "old": "2.4.6", "new": "2.5.0"}]
    (command,) = why["bisect"]
    assert command.startswith("perfsuite bisect --package numpy --good 2.4.6 --bad 2.5.0 -- ")
    assert NUMPY in command
    assert check(doc, "tensorflow")["changes"] == []


def test_a_change_with_nothing_changed_in_the_stack_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_nights(tmp_path, [40.0] * 30 + [34.0] * 30)
    assert main(["history", "--report-dir", str(root)]) == EXIT_REGRESSED
    out = capsys.readouterr().out
    assert f"regressed: {NUMPY} at run 31" in out
    assert NOTHING in out
    assert "history: 1 regressed, 1 steady; fails on regressed (exit 1)" in out


def test_an_improvement_passes_unless_fail_on_names_it(tmp_path: Path) -> None:
    root = write_nights(tmp_path, [40.0] * 30 + [46.0] * 30)
    code, doc = history_json(root)
    assert code == EXIT_OK and doc["verdict"] == "improved"
    assert check(doc, "numpy")["changes"][0]["direction"] == "improved"
    assert check(doc, "numpy")["changes"][0]["attribution"]["bisect"] == []
    code, _ = history_json(root, "--fail-on", "regressed,improved")
    assert code == EXIT_REGRESSED


def test_run_numbers_count_the_profiles_runs_not_the_checks_points(tmp_path: Path) -> None:
    # numpy's check is missing from the first 5 runs: its change at run 13 is "run 13".
    root = write_nights(tmp_path, [40.0] * 12 + [34.0] * 28, skip_numpy_before=5)
    _, doc = history_json(root)
    numpy = check(doc, "numpy")
    assert numpy["points"][0]["run"] == 6
    assert [c["run"] for c in numpy["changes"]] == [13]


def test_last_and_since_keep_the_profiles_numbering(tmp_path: Path) -> None:
    root = write_nights(tmp_path, [40.0] * 30 + [34.0] * 30)
    _, doc = history_json(root, "--last", "20")
    assert (doc["first_run"], doc["last_run"], doc["runs"]) == (41, 60, 20)
    assert check(doc, "numpy")["changes"] == []  # the step is before the window
    _, doc = history_json(root, "--since", "2026-02-01")  # night 28 onwards
    assert doc["first_run"] == 29 and doc["settings"]["since"].startswith("2026-02-01")
    assert [c["run"] for c in check(doc, "numpy")["changes"]] == [31]


def test_the_sparkline_covers_the_runs_the_first_and_last_columns_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_nights(tmp_path, [40.0] * 30 + [34.0] * 90)
    main(["history", "--report-dir", str(root), "-k", "numpy"])
    row = next(line for line in capsys.readouterr().out.splitlines() if NUMPY in line)
    spark = next(word for word in row.split() if set(word) <= set(history_text.SPARKS))
    assert len(spark) == 60  # 120 runs, two to a character
    # The first 15 characters are the 30 runs before the step (high), the rest after (low).
    assert min(history_text.SPARKS.index(c) for c in spark[:15]) >= 5
    assert max(history_text.SPARKS.index(c) for c in spark[15:]) <= 2


def test_a_short_history_is_unknown_and_fails_only_when_asked(tmp_path: Path) -> None:
    root = write_nights(tmp_path, [40.0] * 3)
    code, doc = history_json(root)
    assert code == EXIT_OK and {c["verdict"] for c in doc["checks"]} == {"unknown"}
    assert history_json(root, "--fail-on", "unknown")[0] == EXIT_REGRESSED


def test_the_json_document_has_the_documented_fields(tmp_path: Path) -> None:
    root = write_nights(tmp_path, [40.0] * 30 + [34.0] * 30)
    _, doc = history_json(root)
    assert set(doc) == {
        "schema_version", "profile", "runs", "first_run", "last_run", "from", "to",
        "settings", "verdict", "exit_status", "skipped_records", "checks",
    }  # fmt: skip
    numpy = check(doc, "numpy")
    assert set(numpy) == {
        "id", "unit", "higher_is_better", "verdict", "spread", "nights_to_detect", "points",
        "changes",
    }  # fmt: skip
    assert set(numpy["nights_to_detect"]) == {"0.05", "0.1", "0.2"}
    assert set(numpy["points"][0]) == {"run", "run_id", "created", "value", "outlier"}
    assert set(numpy["changes"][0]) == {
        "run", "run_id", "created", "direction", "before", "after", "ratio", "interval",
        "p_value", "attribution",
    }  # fmt: skip
    docs = (Path(__file__).parents[1] / "docs" / "history.md").read_text()
    for key in [*doc, *numpy, *numpy["changes"][0], *numpy["changes"][0]["attribution"]]:
        assert f"`{key}`" in docs, key


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "argument --since: expected an ISO date"),
        (["--since", "2026-13-01"], "argument --since: expected an ISO date"),
        (["--last", "0"], "argument --last: expected a whole number >= 1"),
        (["--fail-on", "drift"], "argument --fail-on"),
        (["--min-effect", "2"], "argument --min-effect"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    root = write_nights(tmp_path, [40.0] * 6)
    with pytest.raises(SystemExit) as exc:
        main(["history", "--report-dir", str(root), *args])
    assert exc.value.code == EXIT_USAGE
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0]


def test_a_since_after_every_run_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_nights(tmp_path, [40.0] * 6)
    assert main(["history", "--report-dir", str(root), "--since", "2030-01-01"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("perfsuite: error: ") and "no run since 2030-01-01" in err
    assert "\n" not in err


def test_the_html_site_has_a_self_contained_page_per_profile(tmp_path: Path) -> None:
    versions = ["2.4.6"] * 30 + ["2.5.0"] * 30
    root = write_nights(tmp_path / "reports", [40.0] * 30 + [34.0] * 30, numpy_versions=versions)
    site = tmp_path / "site"
    assert main(["history", "--report-dir", str(root), "--html", str(site)]) == EXIT_REGRESSED
    page = (site / f"{PROFILE}.html").read_text()
    assert f'href="{PROFILE}.html"' in (site / "index.html").read_text()
    assert page.count("<svg") == 2  # a chart per check
    assert re.search(r"run 31: -1[45]\.\d%", page)  # the change marked, with its size
    assert "software.numpy.version: &#39;2.4.6&#39; -&gt; &#39;2.5.0&#39;" in page
    assert "perfsuite bisect --package numpy --good 2.4.6 --bad 2.5.0" in page
    assert "http://" not in page.replace("http://www.w3.org", "")
    assert "<script" not in page and "<link" not in page


def test_an_html_target_that_is_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_nights(tmp_path / "reports", [40.0] * 6)
    (tmp_path / "site").write_text("a file")
    code = main(["history", "--report-dir", str(root), "--html", str(tmp_path / "site")])
    assert code == EXIT_USAGE
    assert "not a directory" in capsys.readouterr().err
    assert (tmp_path / "site").read_text() == "a file"


def test_attribution_lists_options_kernel_and_a_downgrade_without_a_bisect() -> None:
    from perfsuite.judge.attribution import attribute

    before = load_record(FIXTURE)
    env: dict[str, Any] = json.loads(json.dumps(before.environment))
    env["host"]["kernel"] = "6.19.0"
    env["software"]["numpy"]["version"] = "2.3.0"  # a downgrade
    after = replace(
        before, run_id="after", environment=env, settings={**before.settings, "repetitions": 5}
    )
    why = attribute(before, after, check=NUMPY, direction="regressed")
    keys = [c.key for c in why.changes]
    assert keys == ["host.kernel", "options.repetitions", "software.numpy.version"]
    assert why.bisect == ()
    assert [(m.package, m.old, m.new) for m in why.not_bisected] == [("numpy", "2.4.6", "2.3.0")]
    lines = attribution_lines(why)
    assert "numpy went from 2.4.6 to 2.3.0" in lines[-1]
    assert "options.repetitions: 3 -> 5" in lines and NOTHING not in " ".join(lines)
    same = attribute(before, replace(before, run_id="same"), check=NUMPY, direction="regressed")
    assert same.changes == () and attribution_lines(same) == [
        f"{NOTHING} ({before.run_id} -> same)"
    ]
