"""What a signal to ``perfsuite fleet run``, ``ab`` or ``bisect`` leaves running.

Starts the command from a given checkout (``--tree``, default this one) with one check that
hangs, waits until the hung check has started, sends the signal, then counts, 30 s later,
the processes the command started (every process carrying this run's mark in its
environment) and the files left in its private temporary folder.  Whatever is left is then
killed.  Run it against an old checkout and this one to compare:

    python -m lab.signals_left --tree ../old-checkout --command fleet --signal TERM
    python -m lab.signals_left --command ab --signal HUP

``bisect`` builds environments from the package index: it is not covered here (its tests
use a local wheel index).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]

HANG = """
import os, pathlib, time
from perfsuite.measure.loop import Workload
from perfsuite.model import Work

def work():
    if os.environ.get("LAB_HANG"):
        pathlib.Path(os.environ["LAB_STARTED"]).write_text(str(os.getpid()))
        time.sleep(900)
    return sum(range(20000))

def test_loop(perf):
    perf.measure(Workload(check="loop", params={}, metric="rate", unit="loop/s",
                          work=Work(1.0, "loop"), run=work))
"""

FLEET_HANG = """
import os, pathlib, time

def test_hang():
    pathlib.Path(os.environ["LAB_STARTED"]).write_text(str(os.getpid()))
    time.sleep(900)
"""


def marked(mark: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``mark``."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("LAB_SIGNAL_MARK") == mark and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def command(kind: str, work: Path) -> tuple[list[str], dict[str, str]]:
    """The command line for ``kind`` with its hung check, and the extra environment."""
    py = sys.executable
    if kind == "fleet":
        (work / "test_hang.py").write_text(FLEET_HANG)
        (work / "hosts").write_text("localhost\n")
        args = ["fleet", "run", "--dir", str(work / "fleet"), "--hostfile", str(work / "hosts"),
                "--timeout", "600", "--", str(work / "test_hang.py"), "-q"]  # fmt: skip
        return [py, "-m", "perfsuite", *args], {}
    (work / "test_hang.py").write_text(HANG)
    args = ["ab", "--a", py, "--b", py, "--b-env", "LAB_HANG=1", "--output-dir",
            str(work / "ab"), "--", str(work / "test_hang.py"), "-q"]  # fmt: skip
    return [py, "-m", "perfsuite", *args], {}


def trial(tree: Path, kind: str, sig: signal.Signals, wait_s: float) -> dict[str, object]:
    """One run: the counts before and after the signal, and the command's exit status."""
    work = Path(tempfile.mkdtemp(prefix=f"lab-signals-{kind}-"))
    tmp = work / "tmp"
    tmp.mkdir()
    mark = uuid.uuid4().hex
    argv, extra = command(kind, work)
    env = {**os.environ, **extra, "PYTHONPATH": str(tree), "LAB_SIGNAL_MARK": mark,
           "LAB_STARTED": str(work / "started"), "TMPDIR": str(tmp)}  # fmt: skip
    env.pop("SLURM_JOB_ID", None)
    proc = subprocess.Popen(argv, cwd=work, env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    end = time.monotonic() + 300
    while not (work / "started").exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.5)
    started = (work / "started").exists()
    before = len(marked(mark))
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=120)
        status: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        out, status = "(still running 120 s after the signal)", None
    time.sleep(wait_s)
    left = marked(mark)
    left_names = sorted({" ".join(p.cmdline()[:3])[:60] for p in left if p.is_running()})
    files = [str(p.relative_to(tmp)) for p in tmp.rglob("*")]
    written = sorted(str(p.relative_to(work)) for p in work.rglob("*.json"))
    for p in left:  # leave the machine as it was
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "tree": str(tree), "command": kind, "signal": sig.name, "hung_check_started": started,
        "processes_before": before, "processes_left": len(left), "left": left_names,
        "temporary_files_left": len(files), "temporary_files": files[:10],
        "exit_status": status, "json_written": written,
        "last_line": out.strip().splitlines()[-1] if out.strip() else "",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to run (default: this)")
    parser.add_argument("--command", choices=["fleet", "ab"], default="fleet")
    parser.add_argument("--signal", choices=["INT", "TERM", "HUP"], default="TERM")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds before counting")
    args = parser.parse_args()
    sig = signal.Signals[f"SIG{args.signal}"]
    print(json.dumps(trial(args.tree.resolve(), args.command, sig, args.wait), indent=1))


if __name__ == "__main__":
    main()
