"""What ``compare``, ``report``, ``history`` and ``fleet report`` make of the golden records.

The golden set (``records/``): CPU run records, the committed H100 and H200 records, A/B
records and a synthetic 12-node fleet (``lab/fleet_scale.py``, seed 1); ``report`` renders a
run and an A/B's record.  Refactoring the tree must not change what the commands print or
write from it, apart from paths; a change meant to change the output regenerates
``expected/`` with

    python -m tests.golden.outputs            # rewrites tests/golden/expected/

and the diff of ``expected/`` shows, in review, what changed for users.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from pathlib import Path

from perfsuite.cli import main

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
EXPECTED = HERE / "expected"


def commands(out: Path, records: Path) -> dict[str, list[str]]:
    """Each output's name and the command that makes it (``out``: where files go).

    ``records``: a copy of the golden records (``fleet report`` writes its digests beside
    them, and the repository's files are never written).
    """
    cpu, dev = records / "cpu-amd-epyc-2c", records / "devcpu"
    h100 = sorted((records / "h100-sxm").glob("*.json"))
    return {
        "compare-cpu": ["compare", str(cpu / "run-a-tf220.json"), str(cpu / "run-b-tf221.json"),
                        "--html", str(out / "compare-cpu.html")],
        "compare-h100": ["compare", *map(str, h100)],
        "report-cpu": ["report", str(dev / "report-run.json"), "--baseline",
                       str(dev / "report-baseline.json"), "--report-dir", str(records),
                       "-o", str(out / "report-cpu.html")],
        "report-h100": ["report", str(h100[0]), "--report-dir", str(records),
                        "-o", str(out / "report-h100.html")],
        "report-ab": ["report", str(records / "h200" / "ab-5pct-20261128T191652Z.json"),
                      "-o", str(out / "report-ab.html")],
        "history-h100": ["history", "--report-dir", str(records), "--profile", "h100-sxm"],
        "history-h200": ["history", "--report-dir", str(records), "--profile", "h200"],
        "history-cpu": ["history", "--report-dir", str(records), "--profile", "cpu-amd-epyc-2c"],
        "fleet-report": ["fleet", "report", str(records / "fleet"), "--drain",
                         str(out / "drain.json"), "--html", str(out / "fleet.html")],
    }  # fmt: skip


# What differs from one run to the next: how long a page took to render, and when the
# drain list was written (records keep their own times); and what differs with the version
# of a library rather than with perfsuite: a chart's coordinates follow matplotlib's
# (3.7 and 3.10 place the same axes a few points apart), so each inline chart is kept as
# one line, its presence compared, its drawing tested in test_report.py.
VARIES = (
    (re.compile(r"Rendered by perfsuite in [0-9.]+ s"), "Rendered by perfsuite in <T> s"),
    (re.compile(r'^ "created": "[^"]*"', re.M), ' "created": "<NOW>"'),
    (re.compile(r"<svg\b.*?</svg>", re.S), "<svg>(a chart)</svg>"),
)


def normalised(text: str, out: Path, records: Path) -> str:
    """The text with the paths and times that differ between runs named, not spelled."""
    text = text.replace(str(records), "<RECORDS>").replace(str(out), "<OUT>")
    for pattern, name in VARIES:
        text = pattern.sub(name, text)
    return text


def outputs(out: Path) -> dict[str, str]:
    """Every output, by file name: each command's exit status, stdout and stderr, and files."""
    made: dict[str, str] = {}
    records = out.parent / f"{out.name}-records"
    shutil.copytree(RECORDS, records, ignore=shutil.ignore_patterns("*.fleet.json"))
    for name, argv in commands(out, records).items():
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
        made[f"{name}.txt"] = normalised(
            f"$ perfsuite {' '.join(argv)}\nexit {code}\n--- stdout\n{stdout.getvalue()}"
            f"--- stderr\n{stderr.getvalue()}",
            out,
            records,
        )
    for path in sorted(out.iterdir()):
        made[path.name] = normalised(path.read_text(), out, records)
    return made


def rewrite() -> None:
    """Regenerate ``expected/`` from this tree."""
    import tempfile

    EXPECTED.mkdir(exist_ok=True)
    for old in EXPECTED.iterdir():
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in outputs(Path(tmp)).items():
            (EXPECTED / name).write_text(text)
    print(f"wrote {len(list(EXPECTED.iterdir()))} files to {EXPECTED}", file=sys.stderr)


if __name__ == "__main__":
    rewrite()
