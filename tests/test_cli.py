"""The ``perfsuite`` command line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfsuite.cli import main
from perfsuite.hardware.profile import load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"


def test_profiles_lists_every_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name in ("v100", "a100", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "mi250x"):
        assert f"\n{name} " in out
    assert "1555 GB/s" in out


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
    assert main(["profiles", "show", "zz"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("perfsuite: error: unknown hardware profile 'zz'") and err.count("\n") == 1
    )
    shutil.copy(FIXTURES / "slowgpu.toml", tmp_path / "slowgpu.toml")
    (tmp_path / "bad.toml").write_text("name = 'bad'\n")
    assert main(["profiles", "--profile-dir", str(tmp_path)]) == 2
    assert "bad.toml: missing field 'schema_version'" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    exe = shutil.which("perfsuite", path=str(Path(sys.executable).parent))
    assert exe, "the perfsuite console script is installed beside python"
    out = subprocess.run([exe, "profiles"], capture_output=True, text=True, check=True).stdout
    assert "a100" in out
