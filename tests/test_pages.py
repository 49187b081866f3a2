"""Warm pages (``perfsuite.measure.pages``): the child's requests and the server's keeper."""

from __future__ import annotations

import faulthandler
import os
import threading
from collections.abc import Iterator

import psutil
import pytest

from perfsuite.measure import pages

MIB = 2**20


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, int, list[str]]]:
    """A server thread that answers this process with a Keeper; what it heard."""
    asks_r, asks_w = os.pipe()
    answers_r, answers_w = os.pipe()
    heard: list[str] = []
    keeper = pages.Keeper()

    def serve() -> None:
        with os.fdopen(asks_r, "rb") as asks:
            for line in asks:
                heard.append(line.decode().strip())
                os.write(answers_w, keeper.answer(line.decode()).encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(pages, "_link", None)
    pages.connect(asks_w, answers_r)
    try:
        yield asks_w, answers_r, heard
    finally:
        os.close(asks_w)
        thread.join(10)
        os.close(answers_r)
        os.close(answers_w)
        keeper.free()


def test_outside_a_warm_side_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "_link", None)
    monkeypatch.setattr(pages._Link, "request", lambda *args: pytest.fail("asked"))
    pages.take(MIB)
    pages.keep(MIB)
    assert not pages.connected()


def test_a_child_asks_and_waits_for_the_answer(link: tuple[int, int, list[str]]) -> None:
    *_, heard = link
    pages.keep(4 * MIB)
    pages.take(4 * MIB)
    assert heard == [f"keep {4 * MIB}", f"take {4 * MIB}"]
    assert pages.connected()


def test_a_server_that_does_not_answer_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asks_r, asks_w = os.pipe()
    answers_r, answers_w = os.pipe()
    monkeypatch.setattr(pages, "ANSWER_TIMEOUT_S", 0.01)
    try:
        pages.connect(asks_w, answers_r)
        pages.take(MIB)  # nobody answers
        assert not pages.connected()
        assert os.read(asks_r, 100) == f"take {MIB}\n".encode()
        pages.take(MIB)  # not asked again: nothing more was written
        os.set_blocking(asks_r, False)
        with pytest.raises(BlockingIOError):
            os.read(asks_r, 100)
    finally:
        monkeypatch.setattr(pages, "_link", None)
        for fd in (asks_r, asks_w, answers_r, answers_w):
            os.close(fd)


def test_a_server_that_ended_is_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asks_r, asks_w = os.pipe()
    answers_r, answers_w = os.pipe()
    os.close(answers_w)  # the server is gone: the answer pipe reads empty
    try:
        pages.connect(asks_w, answers_r)
        pages.keep(MIB)
        assert not pages.connected()
    finally:
        monkeypatch.setattr(pages, "_link", None)
        for fd in (asks_r, asks_w, answers_r):
            os.close(fd)


def test_the_keeper_holds_what_was_freed_until_the_next_child_takes_it() -> None:
    notes: list[str] = []
    keeper = pages.Keeper(notes.append)
    assert keeper.answer(f"keep {8 * MIB}") == "ok"
    assert keeper.kept_bytes == 8 * MIB
    keeper.round_ended()  # the child asked: kept into the next round
    assert keeper.kept_bytes == 8 * MIB
    assert keeper.answer(f"take {8 * MIB}") == "ok"
    assert keeper.kept_bytes == 0
    assert any("kept 0.01 GiB resident" in n for n in notes), notes
    assert any("freed 0.01 GiB" in n for n in notes), notes


def test_pages_no_child_asked_for_are_freed_at_the_round_s_end() -> None:
    keeper = pages.Keeper()
    keeper.answer(f"keep {MIB}")
    keeper.round_ended()
    assert keeper.kept_bytes == MIB
    keeper.round_ended()  # a round with no STREAM set: not wanted any more
    assert keeper.kept_bytes == 0


def test_the_keeper_keeps_nothing_that_would_crowd_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    notes: list[str] = []
    keeper = pages.Keeper(notes.append)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": 10 * MIB}))
    assert keeper.answer(f"keep {9 * MIB}") == "ok"
    assert keeper.kept_bytes == 0
    assert notes and "not kept" in notes[0]


@pytest.mark.parametrize("line", ["", "take", "keep -1", "give 5", "keep 5 6"])
def test_the_keeper_refuses_what_it_does_not_know(line: str) -> None:
    keeper = pages.Keeper()
    assert keeper.answer(line) == "unknown"
    assert keeper.kept_bytes == 0 and not keeper.asked


def test_a_kept_mapping_is_not_inherited_by_a_fork() -> None:
    """MADV_DONTFORK: the next child does not map the pages the server frees for it."""
    keeper = pages.Keeper()
    keeper.hold(4 * MIB)
    try:
        address = id(keeper.kept)  # the object; its mapping is checked in the child
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                faulthandler.disable()  # the fault below is the expected end, not a crash
                assert keeper.kept is not None and id(keeper.kept) == address
                keeper.kept[0]  # not mapped here: SIGSEGV
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), status
    finally:
        keeper.free()


def test_a_failure_to_keep_is_noted_and_the_child_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes: list[str] = []
    keeper = pages.Keeper(notes.append)

    def refused(mapping: object) -> None:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(pages, "_fault_in", refused)
    assert keeper.answer(f"keep {MIB}") == "ok"
    assert keeper.kept_bytes == 0 and "not kept" in notes[-1]
    monkeypatch.setattr(keeper, "free", lambda: 1 / 0)
    assert keeper.answer(f"take {MIB}") == "ok"  # the server goes on serving
    assert notes[-1].startswith("pages: take failed: ZeroDivisionError")
