"""Unit tests: a side killed by the kernel's out-of-memory killer is named as such."""

from __future__ import annotations

import signal
from pathlib import Path

from perfsuite.ab import launch

VMSTAT = "nr_free_pages 123\noom_kill {n}\npgfault 9\n"


def test_the_out_of_memory_count_is_read_from_vmstat(tmp_path: Path) -> None:
    vmstat = tmp_path / "vmstat"
    vmstat.write_text(VMSTAT.format(n=3))
    assert launch.oom_kills(vmstat) == 3
    vmstat.write_text("nr_free_pages 1\n")  # a kernel without the counter
    assert launch.oom_kills(vmstat) is None
    assert launch.oom_kills(tmp_path / "absent") is None


def test_a_sigkill_during_an_out_of_memory_kill_says_so(tmp_path: Path) -> None:
    killed = -signal.SIGKILL
    assert launch.death_words(killed) == "killed by SIGKILL"
    assert "out-of-memory killer" in launch.death_words(killed, out_of_memory=True)
    # only a SIGKILL is the killer's; a segfault stays a segfault
    assert launch.death_words(-signal.SIGSEGV, out_of_memory=True) == "killed by SIGSEGV"
    assert launch.death_words(1, out_of_memory=True) == "exited 1"


def test_a_side_without_a_record_killed_while_memory_ran_out(tmp_path: Path) -> None:
    (tmp_path / launch.TRACE_FILE).write_text('{"start": "test_stream.py::test_copy"}\n')
    got = launch.read_side(tmp_path, -signal.SIGKILL, False, 8.0, out_of_memory=True)
    assert got.failed.startswith("killed by SIGKILL (the kernel's out-of-memory killer")
    assert got.failed.endswith("in test_stream.py::test_copy, without a run record")
    plain = launch.read_side(tmp_path, -signal.SIGKILL, False, 8.0)
    assert "out-of-memory" not in plain.failed
