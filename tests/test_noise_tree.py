"""The noise guard knows its own process tree: real processes, inside it and outside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from perfsuite.measure import noise
from perfsuite.model import FlagKind

pytestmark = pytest.mark.integration

BURN = "import time\nt=time.time()\nwhile time.time()-t<{s}: pass"


def foreign_burner(seconds: float) -> int:
    """A CPU burner outside this process tree (its shell exits: it is orphaned)."""
    out = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', BURN.format(s=seconds)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


@pytest.fixture
def session_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setenv(noise.SESSION_PID_ENV, str(os.getpid()))
    yield os.getpid()


def _window(seconds: float = 1.5) -> dict:
    before = noise.snapshot(with_gpus=False)
    time.sleep(seconds)
    return noise.assess(before, noise.snapshot(with_gpus=False))


def test_a_child_of_the_session_is_not_foreign_load(session_root: int) -> None:
    """A child burning a core adds nothing to foreign load (the host may be busy anyway)."""
    alone = _window()
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=3)])
    try:
        time.sleep(0.3)  # started and burning
        facts = _window()
    finally:
        child.kill()
        child.wait()
    # Counted as foreign, the child would add about a core to what the host shows without it.
    assert facts["foreign_cores"] < alone["foreign_cores"] + 0.5, (alone, facts)


@pytest.mark.smoke
def test_a_process_outside_the_tree_is_foreign_load(session_root: int) -> None:
    pid = foreign_burner(4)
    try:
        time.sleep(0.3)
        facts = _window()
    finally:
        os.kill(pid, signal.SIGKILL)
    assert facts["foreign_cores"] > noise.FOREIGN_LOAD_CORES
    assert any(flag.kind is FlagKind.FOREIGN_LOAD for flag in facts["flags"])


def test_the_root_is_this_process_when_none_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(noise.SESSION_PID_ENV, raising=False)
    assert noise.session_root() == os.getpid()
    # A named pid that is not an ancestor (here: a child) is not trusted as the root.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        monkeypatch.setenv(noise.SESSION_PID_ENV, str(child.pid))
        assert noise.session_root() == os.getpid()
    finally:
        child.kill()
        child.wait()
