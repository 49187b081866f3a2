"""The ``perfsuite`` command line."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.hardware.profile import load_profile
from perfsuite.judge import outcome

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"


def test_profiles_lists_every_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name in ("v100", "a100", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "mi250x"):
        assert f"\n{name} " in out
    assert "1555 GB/s" in out


def test_backends_lists_what_perf_backend_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    """The command --perf-backend's help points to; the names are the options' own."""
    from perfsuite.options import known_backends

    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    names = {line.split()[0] for line in out.splitlines()[1:]}
    assert names == set(known_backends())
    assert "\nnumpy       framework" in out
    horovod = next(line for line in out.splitlines() if line.startswith("horovod"))
    installed = importlib.util.find_spec("horovod") is not None
    assert ("scripts/horovod-build" in horovod) is not installed


def test_profiles_show_prints_a_loadable_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profiles", "show", "h200"]) == 0
    text = capsys.readouterr().out
    (tmp_path / "h200.toml").write_text(text)
    assert load_profile(tmp_path / "h200.toml").figure("memory.bandwidth_gbs") == 4800


def test_profiles_with_a_user_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--profile-dir", str(FIXTURES)]) == 0
    assert "\nslowgpu " in capsys.readouterr().out


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "show", "zz"]) == outcome.EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err.startswith("perfsuite: error: unknown hardware profile 'zz'") and err.count("\n") == 1
    )
    shutil.copy(FIXTURES / "slowgpu.toml", tmp_path / "slowgpu.toml")
    (tmp_path / "bad.toml").write_text("name = 'bad'\n")
    assert main(["profiles", "--profile-dir", str(tmp_path)]) == outcome.EXIT_USAGE
    assert "bad.toml: missing field 'schema_version'" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    exe = shutil.which("perfsuite", path=str(Path(sys.executable).parent))
    assert exe, "the perfsuite console script is installed beside python"
    out = subprocess.run([exe, "profiles"], capture_output=True, text=True, check=True).stdout
    assert "a100" in out


def test_profiles_list_auto_and_what_it_resolves_to(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("auto") and "this machine: " in last


def test_profile_names_are_case_insensitive_with_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["profiles", "show", "A100"]) == 0
    assert 'name = "a100"' in capsys.readouterr().out
    assert main(["profiles", "show", "H100"]) == outcome.EXIT_USAGE
    err = capsys.readouterr().err
    assert "did you mean h100-nvl, h100-pcie or h100-sxm" in err


def test_estimated_figures_are_rounded_to_meaningful_digits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["profiles", "show", "auto"]) == 0
    out = capsys.readouterr().out
    for line in out.splitlines():
        if line.startswith(("fp32_tflops", "fp64_tflops", "clock_ghz")):
            digits = line.split("=")[1].strip().replace(".", "").lstrip("0")
            assert len(digits) <= 4, line


def test_help_is_formatted_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:\n  perfsuite profiles" in out
    assert "\n  4  usage error" in out


COMMANDS = [
    ["profiles"],
    ["backends"],
    ["compare"],
    ["ab"],
    ["bisect"],
    ["fleet"],
    ["fleet", "run"],
    ["fleet", "report"],
    ["report"],
    ["history"],
    ["baseline"],
    ["baseline", "accept"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_commands_help_ends_with_the_one_exit_table(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == outcome.EXIT_OK
    out = capsys.readouterr().out
    table = out[out.index("exit status (one table") :].splitlines()
    codes = [line.split()[0] for line in table[1:] if line[:3].strip().isdigit()]
    assert codes == ["0", "1", "2", "3", "4", "5", "6"]


# A status named in words in a --help text, and the constant it must be (review 1, D12).
STATUS_WORDS = {
    "usage error": outcome.EXIT_USAGE,
    "inconclusive": outcome.EXIT_INCONCLUSIVE,
    "undecided": outcome.EXIT_INCONCLUSIVE,
    "interrupted": outcome.EXIT_INTERRUPTED,
    "internal error": outcome.EXIT_INTERNAL,
    "regression": outcome.EXIT_REGRESSED,
}
_WORDS = "|".join(STATUS_WORDS)
# "4 usage error", "6 undecided"; and "usage error (exit 4)", "undecided: exit 6"
_NUMBER_THEN_WORD = re.compile(rf"(?<![\w.-])(\d+)\s+({_WORDS})")
_WORD_THEN_NUMBER = re.compile(rf"({_WORDS})s?\s*(?:\(exit|: exit|, exit)\s+(\d+)")


@pytest.mark.parametrize("command", [[], *COMMANDS], ids=lambda c: " ".join(c) or "perfsuite")
def test_review_d12_no_help_text_contradicts_the_exit_table(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A status a description states in words is the table's (no "2 usage", "3 inconclusive")."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    stated = [(int(n), w) for n, w in _NUMBER_THEN_WORD.findall(text)]
    stated += [(int(n), w) for w, n in _WORD_THEN_NUMBER.findall(text)]
    wrong = [(n, w) for n, w in stated if STATUS_WORDS[w] != n]
    assert not wrong, f"--help of {' '.join(command) or 'perfsuite'} states {wrong}"
    assert stated, "the table itself names its statuses"


def test_review_d12_the_check_sees_a_contradiction() -> None:
    """The patterns above find the texts the review quoted."""
    for text in ("Exit status: 0 ok, 2 usage error.", "3 inconclusive (noisy checks)"):
        found = _NUMBER_THEN_WORD.findall(text)
        assert found and any(STATUS_WORDS[w] != int(n) for n, w in found)


def test_a_usage_error_exits_with_the_tables_usage_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["compare", "--no-such-option"])
    assert done.value.code == outcome.EXIT_USAGE == pytest.ExitCode.USAGE_ERROR
    assert "perfsuite compare: error:" in capsys.readouterr().err


def test_a_defect_is_an_internal_error_never_a_regression(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfsuite.cli import profiles

    def broken(args: object) -> int:
        raise ZeroDivisionError("a defect")

    monkeypatch.setattr(profiles, "backends_command", broken)
    assert main(["backends"]) == outcome.EXIT_INTERNAL == pytest.ExitCode.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "ZeroDivisionError: a defect" in err and "internal error" in err


def test_history_picks_this_machines_profile_when_several_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from perfsuite.hardware.detect import resolve
    from perfsuite.hardware.profile import ProfileRegistry

    here = resolve("auto", ProfileRegistry()).name
    record = json.loads((FIXTURES.parent / "report-run.json").read_text())
    for name in ("devcpu", here):
        folder = tmp_path / "reports" / name
        folder.mkdir(parents=True)
        record["hardware_profile"]["name"] = name
        (folder / f"{record['run_id']}.json").write_text(json.dumps(record))
    monkeypatch.chdir(tmp_path)
    assert main(["history"]) in (0, 1)
    assert capsys.readouterr().out.startswith(f"profile {here}: 1 runs")


def test_profiles_columns_fit_long_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    column = lines[0].index("kind")
    row = next(line for line in lines if line.startswith("a100-80gb-pcie"))
    assert row[column:].startswith("gpu"), row


def test_history_profile_is_case_insensitive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    record = json.loads((FIXTURES.parent / "report-run.json").read_text())
    folder = tmp_path / "a100"
    folder.mkdir()
    record["hardware_profile"]["name"] = "a100"
    (folder / f"{record['run_id']}.json").write_text(json.dumps(record))
    assert main(["history", "--report-dir", str(tmp_path), "--profile", "A100"]) in (0, 1)
    assert capsys.readouterr().out.startswith("profile a100: 1 runs")


def test_the_detected_profile_answers_to_its_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    from perfsuite.hardware.detect import resolve
    from perfsuite.hardware.profile import ProfileRegistry

    here = resolve("auto", ProfileRegistry()).name
    assert main(["profiles", "show", here.upper()]) == 0
    assert f'name = "{here}"' in capsys.readouterr().out


def test_history_suggests_a_profile_for_a_typo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    (tmp_path / "cpu-amd-epyc-2c").mkdir()
    shutil.copy(FIXTURES.parent / "report-run.json", tmp_path / "cpu-amd-epyc-2c" / "run.json")
    assert (
        main(["history", "--report-dir", str(tmp_path), "--profile", "cpu-amd-epic-2c"])
        == outcome.EXIT_USAGE
    )
    assert "did you mean cpu-amd-epyc-2c?" in capsys.readouterr().err
