"""Warm sides (``perfsuite.ab.forks``) with a real server and real forks of it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfsuite.ab.forks import Server, ServerGone, WarmSides
from perfsuite.ab.launch import SideCommand, launch
from perfsuite.measure import processes

pytestmark = pytest.mark.integration

CHECK = """
import os, sys

def test_env_and_descriptor():
    assert os.environ["SIDE_WORD"] == "hello"
    assert "SERVER_WORD" not in os.environ  # a round's variables are its request's alone
    (fd,) = (int(x) for x in os.environ["SIDE_PIPE"].split(","))
    os.write(fd, f"{os.getpid()} {os.getsid(0)} {os.getppid()}".encode())
    framework = os.environ.get("SIDE_FRAMEWORK")
    if framework:
        __import__(framework)  # the server imports it between rounds

def test_fails_when_asked():
    assert not os.environ.get("SIDE_FAIL")
"""

SLEEPER = """
import time

def test_sleeps():
    time.sleep(120)
"""


def _deadline(seconds: float = 120.0) -> float:
    return time.monotonic() + seconds


@pytest.fixture
def server(tmp_path: Path):
    started = Server(sys.executable, {"SERVER_WORD": "kept"}, tmp_path / "server.log")
    try:
        assert started.wait_ready(_deadline()), started.gone
        yield started
    finally:
        started.stop()


def _args(tmp_path: Path, name: str) -> list[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return [
        str(tmp_path / name),
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(tmp_path / "pytest.ini"),
    ]


def _environ(**extra: str) -> dict[str, str]:
    return {k: v for k, v in {**os.environ, **extra}.items() if k != "SERVER_WORD"}


def _run_check(server: Server, tmp_path: Path, log: Path, **extra: str) -> tuple[int, str]:
    """Fork the check with a pipe in SIDE_PIPE: its exit status and what it wrote there."""
    (tmp_path / "test_side.py").write_text(CHECK)
    reader, writer = os.pipe()
    try:
        child = server.fork(
            _args(tmp_path, "test_side.py"),
            _environ(SIDE_WORD="hello", **extra),
            str(log),
            [writer],
            {"SIDE_PIPE": [0]},
        )
        os.close(writer)
        code = child.wait(timeout=120)
        said = os.read(reader, 200).decode()
    finally:
        os.close(reader)
    assert said.split()[0] == str(child.pid), said
    return code, said


def test_a_fork_runs_pytest_in_a_session_of_its_own_with_its_variables_and_descriptors(
    server: Server, tmp_path: Path
) -> None:
    log = tmp_path / "side.log"
    code, said = _run_check(server, tmp_path, log)
    assert code == 0, log.read_text()
    pid, sid, parent = (int(x) for x in said.split())
    assert sid == pid  # its own session: ending its group ends what it started
    assert parent == server.proc.pid  # a fork of the server, not a new interpreter
    assert "2 passed" in log.read_text()


def test_a_failing_check_exits_1_and_the_server_loads_what_the_child_imported(
    server: Server, tmp_path: Path
) -> None:
    # A framework the server has not imported (perfsuite itself imports numpy).
    framework = next((m for m in ("torch", "tensorflow") if importlib.util.find_spec(m)), "")
    log = tmp_path / "side.log"
    code, _ = _run_check(server, tmp_path, log, SIDE_FAIL="1", SIDE_FRAMEWORK=framework)
    assert code == 1, log.read_text()
    assert "1 failed, 1 passed" in log.read_text()
    assert server.loaded == []  # nothing is imported until the round is over
    server.ask_to_load()
    assert server.took_load(_deadline(300)), server.gone
    assert server.loaded == ([framework] if framework else [])


def test_a_child_that_fails_at_once_is_seen_to_exit(server: Server, tmp_path: Path) -> None:
    """Its start and its exit may arrive in one read: the exit must not be lost."""
    gone = tmp_path / "no-such-folder" / "side.log"  # the child cannot open its log
    child = server.fork(["-q"], _environ(), str(gone))
    assert child.wait(timeout=60) == 1
    nxt = server.fork(["-q"], _environ(), str(tmp_path / "no-such-folder-either" / "x"))
    assert nxt.wait(timeout=60) == 1


def test_ending_a_fork_kills_it_and_the_server_forks_the_next_round(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "test_sleeper.py").write_text(SLEEPER)
    hung = server.fork(_args(tmp_path, "test_sleeper.py"), _environ(), str(tmp_path / "a"))
    with pytest.raises(subprocess.TimeoutExpired):
        hung.wait(timeout=1.0)
    assert hung.poll() is None
    processes.end(hung)
    assert hung.returncode is not None and hung.returncode < 0
    code, _ = _run_check(server, tmp_path, tmp_path / "b")
    assert code == 0, (tmp_path / "b").read_text()


PAGES = """
from perfsuite.measure import pages

def test_asks_for_pages():
    assert pages.connected()  # a fork of the server is linked to it
    pages.take(1 << 20)
    pages.keep(4 << 20)
    assert pages.connected()  # the server answered both
"""


def test_a_fork_s_server_keeps_the_pages_its_child_freed_until_the_next_takes_them(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "test_pages.py").write_text(PAGES)
    for name in ("a", "b"):
        child = server.fork(_args(tmp_path, "test_pages.py"), _environ(), str(tmp_path / name))
        assert child.wait(timeout=120) == 0, (tmp_path / name).read_text()
    said = [line for line in server.log.read_text().splitlines() if line.startswith("pages:")]
    assert [line.split(" (")[0] for line in said] == [
        "pages: kept 0.00 GiB resident",  # the first child freed 4 MiB
        "pages: freed 0.00 GiB for the side's child",  # the second is about to allocate
        "pages: kept 0.00 GiB resident",
    ]


def test_a_dead_server_leaves_the_round_to_a_fresh_process(server: Server, tmp_path: Path) -> None:
    processes.end(server.proc)
    (tmp_path / "test_quick.py").write_text("def test_quick():\n    pass\n")
    command = SideCommand(sys.executable, tuple(_args(tmp_path, "test_quick.py")), {}, 60.0)
    started = launch(command, "A", 1, 0, None, tmp_path, [], 60.0, server=server)
    try:
        assert isinstance(started.proc, subprocess.Popen)  # the server could not fork
        assert started.proc.wait(timeout=120) == 0, started.log.read_text()
    finally:
        processes.reap(started.proc)
    assert server.gone
    with pytest.raises(ServerGone):
        server.fork(["-q"], _environ(), str(tmp_path / "c"))


def test_when_one_side_s_server_ends_both_sides_run_fresh(tmp_path: Path) -> None:
    notes: list[str] = []
    sides = WarmSides(
        {"A": (sys.executable, {}), "B": (sys.executable, {})}, tmp_path, notes.append
    )
    try:
        assert sides.active and sides.server("A") is not None
        processes.end(sides.servers["B"].proc)
        sides.between_rounds(1)  # B cannot answer: both are ended
        assert not sides.active
        assert sides.server("A") is None and sides.server("B") is None
        assert notes == [notes[0]] and "from round 2 on" in notes[0] and "side B" in notes[0]
    finally:
        sides.stop()


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a virtual environment")
@pytest.mark.parametrize("broken", ["no perfsuite", "no interpreter"])
def test_a_side_whose_server_cannot_start_runs_both_sides_fresh(
    tmp_path: Path, broken: str
) -> None:
    """The base interpreter of this environment cannot run perfsuite (an older stack's side)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    python = str(base) if broken == "no perfsuite" else str(tmp_path / "no-python")
    notes: list[str] = []
    sides = WarmSides(
        {"A": (sys.executable, {}), "B": (python, {"PYTHONPATH": ""})}, tmp_path, notes.append
    )
    try:
        assert not sides.active and sides.server("A") is None
        assert len(notes) == 1 and "from the first round" in notes[0] and "side B" in notes[0]
        if broken == "no perfsuite":
            assert "No module named" in notes[0]  # perfsuite, or what it needs
    finally:
        sides.stop()
