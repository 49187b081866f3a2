"""Issue 63, case 27: secrets are redacted by their form, not only by a variable's name.

Each form is set in a variable perfsuite records (an ``OMP_``/``NCCL_``/``XLA`` one, whose
name says nothing secret), and must reach neither the run record, nor the HTML page, nor the
Markdown summary; an older record that holds one is cleaned when a report is rendered.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite import cli
from perfsuite.judge import outcome
from perfsuite.measure.environment import performance_env
from perfsuite.measure.redaction import REDACTED, has_secret, redact_argv, redact_command

FIXTURES = Path(__file__).parent / "fixtures"

# variable -> value; each value's secret part holds a SECRETnn marker that must not leak.
FORMS = {
    "OMP_X": "Bearer SECRET10",
    "NCCL_HF": "hf_SECRET11abcdefghijklmnopqrstuvwxyz",
    "NCCL_SK": "sk-SECRET12abcdefghijklmn",
    "NCCL_AWS": "AKIASECRET13ABCDEFGH",
    "XLA_FLAGS": "--xla_dump_to=/tmp --passphrase SECRET14",
    "TF_XLA_FLAGS": "--access-key SECRET15",
    "OMP_Y": "--clientSecret=SECRET16",
    "KMP_Z": "--hf-token SECRET17",
    "UCX_W": "--db-pass=SECRET18",
    # Review 1, D10: forms the first patterns missed.
    "OMP_D10A": "https://h/?access_token=SECRET20",
    "OMP_D10B": "https://h/x?a=1&auth_token=SECRET21",
    "OMP_D10C": "https://h/?id_token=SECRET22",
    "NCCL_D10D": "client_secret=SECRET23",
    "NCCL_D10E": "host=db pwd=SECRET24",
    "NCCL_D10F": "redis://:SECRET25@cache:6379/0",
    "KMP_D10G": "Bearer:SECRET26",
    "KMP_D10H": "Token SECRET27abcdef",
    "UCX_D10I": "glpat-SECRET28abcdefghijkl",
    "UCX_D10J": "github_pat_SECRET29abcdefghijklmnopqrstu",
    "I_MPI_D10K": "sk_live_SECRET30abcdef",
    "I_MPI_D10L": "rk_test_SECRET31abcdef",
    "MPICH_D10M": "AIzaSECRET32abcdefghijklmnopqrstuvwxyz0",
    "MPICH_D10N": "aws_secret_access_key=SECRET33",
    "OMPI_MCA_D10O": "wJalrXUtnFEMI/K7MDENG/bPxRfiSECRET34EXAM",
}
MARKERS = [f"SECRET{n}" for n in (*range(10, 19), *range(20, 35))]

TOY = """
import numpy as np
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def test_toy(perf):
    a = np.ones(1 << 12)
    b = np.empty_like(a)
    perf.measure(Workload(
        check="toy", params={}, metric="bandwidth", unit="GB/s",
        work=Work(2 * a.nbytes, "B"), run=lambda: np.copyto(b, a), scale=1e9,
    ))
"""


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_form_is_a_secret_whatever_the_variable_is_called(name: str) -> None:
    assert has_secret(FORMS[name])
    assert performance_env({name: FORMS[name]}) == {name: REDACTED}


@pytest.mark.parametrize(
    "value",
    [
        "--max_tokens 5",
        "--passes 2",
        "--xla_cpu_use_thunk_runtime=false",
        "4",
        "--keyfile k",
        # Review 1, D10: what the new forms must not take for a secret.
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # a commit hash: 40 hex digits
        "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
        "/opt/hpcx/ompi/lib/openmpi/Plugins1Abcd",  # 40 characters, a path
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "mlx5_0:1,mlx5_1:1",
        "^lo,docker0",
        "https://h/?page=2&lang=en",
        "Token budget",
        "tcp://10.0.0.1:29500",
    ],
)
def test_flags_that_only_resemble_a_credential_are_kept(value: str) -> None:
    """A part of the flag's name must be the word: --max_tokens and --passes are no secret."""
    assert performance_env({"XLA_FLAGS": value}) == {"XLA_FLAGS": value}


def test_a_recorded_command_line_keeps_its_flags_and_loses_its_secrets() -> None:
    argv = [
        "pytest", "--passphrase", "SECRET1", "--access-key", "SECRET2", "--clientSecret=SECRET3",
        "--token", "-v", "-H", "Authorization: Bearer SECRET4", "hf_SECRET5abcdefghijklmnopqrs",
        "--passes", "2", "-k", "gemm",
    ]  # fmt: skip
    assert redact_argv(argv) == [
        "pytest", "--passphrase", REDACTED, "--access-key", REDACTED,
        f"--clientSecret={REDACTED}", "--token", "-v", "-H", REDACTED, REDACTED,
        "--passes", "2", "-k", "gemm",
    ]  # fmt: skip


def test_case27_no_secret_form_reaches_the_record_the_page_or_the_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FORMS.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_toy=TOY)
    result = pytester.runpytest("--perf-quick", "-p", "no:cacheprovider", "--perf-markdown=s.md")
    result.assert_outcomes(passed=1)
    (record,) = (pytester.path / "reports").rglob("*.json")
    (page,) = (pytester.path / "reports").rglob("*.html")
    variables = json.loads(record.read_text())["environment"]["variables"]
    assert {k: variables.get(k) for k in FORMS} == dict.fromkeys(FORMS, REDACTED)
    leaks = [
        (path.name, marker)
        for path in (record, page, pytester.path / "s.md")
        for marker in MARKERS
        if marker in path.read_text()
    ]
    assert not leaks


def test_case27_a_report_of_an_older_record_never_shows_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record written before these forms were known is cleaned when it is shown."""
    data = json.loads((FIXTURES / "report-run.json").read_text())
    data["environment"].setdefault("variables", {}).update(FORMS)
    (tmp_path / "old.json").write_text(json.dumps(data))
    base = json.loads((FIXTURES / "report-run.json").read_text())
    base["run_id"] = "20261121T145127750Z-vm-f2a9"  # an earlier run, as a baseline is
    (tmp_path / "base.json").write_text(json.dumps(base))
    monkeypatch.chdir(tmp_path)
    status = cli.main(["report", "old.json", "--baseline", "base.json", "-o", "old.html"])
    assert status == outcome.EXIT_OK, capsys.readouterr()
    page = (tmp_path / "old.html").read_text()
    assert [m for m in MARKERS if m in page] == []
    assert "OMP_X" in page


# Review 1, D9: the launcher is one string, split as a shell would before it is redacted.
D9_LAUNCHER = "mpiexec -n {ranks} -H 'Authorization: Bearer SECRETB1'"


@pytest.mark.parametrize(
    ("launcher", "recorded"),
    [
        (D9_LAUNCHER, f"mpiexec -n {{ranks}} -H {REDACTED}"),
        ("mpiexec -n {ranks} --header Bearer SECRETB2", f"mpiexec -n {{ranks}} --header Bearer {REDACTED}"),
        ("srun -n {ranks} --export=ALL,HF=hf_SECRETB3abcdefghijklmnopq", f"srun -n {{ranks}} {REDACTED}"),
        ("mpiexec -n {ranks} -x 'OMP_A=Token SECRETB4abc' -H \"unclosed", "mpiexec -n {ranks} -x 'OMP_A=Token <redacted> -H \"unclosed"),
        ("mpiexec -n {ranks} -f 'my hosts'", "mpiexec -n {ranks} -f 'my hosts'"),
    ],
    ids=["quoted-header", "pair-of-items", "form-in-an-item", "unclosed-quote", "no-secret-kept-as-written"],
)  # fmt: skip
def test_review_d9_a_launcher_is_redacted_as_a_whole_command(launcher: str, recorded: str) -> None:
    assert redact_command(launcher) == recorded


def test_review_d9_a_bearer_pair_split_across_argv_items_is_redacted() -> None:
    argv = ["curl", "-H", "Authorization:", "Bearer", "SECRETB5", "-k", "Token", "SECRETB6abc"]
    assert redact_argv(argv) == [
        "curl", "-H", "Authorization:", "Bearer", REDACTED, "-k", "Token", REDACTED,
    ]  # fmt: skip


def test_review_d9_no_launcher_secret_reaches_the_record_the_page_or_the_summary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_toy=TOY)
    result = pytester.runpytest(
        "--perf-quick", "-p", "no:cacheprovider", "--perf-markdown=s.md",
        f"--perf-launcher={D9_LAUNCHER}",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    (record,) = (pytester.path / "reports").rglob("*.json")
    (page,) = (pytester.path / "reports").rglob("*.html")
    assert json.loads(record.read_text())["settings"]["launcher"] == (
        f"mpiexec -n {{ranks}} -H {REDACTED}"
    )
    leaks = [p.name for p in (record, page, pytester.path / "s.md") if "SECRETB1" in p.read_text()]
    assert not leaks
