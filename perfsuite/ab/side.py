"""The pytest plugin each side of an A/B runs with (``-p perfsuite.ab.side``).

* ``--perf-ab-select FILE``: run only the checks whose node ids FILE lists, one per line (the
  checks still undecided after the first rounds); the rest are deselected.
* A side runs the default mode's cases (each sweep's representatives), not quick mode's one
  per family: a pre-upgrade check wants the sizes and shapes, and its rounds pay for them.
* Each check measures briefly: a fixed warm-up of a tenth of a second and the calibration's
  calls, then the samples the A/B asked for, with no settling windows, no untimed warm-up
  sample and no adaptive top-ups.  An A/B's power comes from its rounds, not from long runs
  of one process, and with samples interleaved each sample after the first is warmed again
  right before it anyway (:func:`perfsuite.measure.loop.measure`).
* Started by ``perfsuite ab`` in lockstep (``PERFSUITE_AB_TURNS`` set), the side waits for its
  turn before each check and gives it back after (:mod:`perfsuite.ab.lockstep`), so it never
  measures beside the other side.  Its last check keeps the turn until the process ends: the
  record it writes then is not written beside a check of the other side.
* With ``PERFSUITE_AB_GRAIN=samples`` it also gives the turn back between a check's samples
  and asks for it again (``NODEID#2``, ``NODEID#3``, ...), so the two sides' samples of a
  check alternate, a fraction of a second apart.  The other side's CPU time while it holds
  the turn between this side's samples is not foreign load to the noise guard: both sides
  run under ``perfsuite ab`` (its process is named in ``PERFSUITE_AB_ROOT``), and what the
  other side's processes spend during those hand-overs counts as the session's own.
  Anything else they do stays foreign.  Its wait is recorded as the check's ``waiting``
  phase, and a per-check alarm (pytest-timeout's ``signal`` method) is paused over it.
* With ``PERFSUITE_AB_TRACE=FILE`` each check's start and normal end are appended to FILE
  as they happen (one JSON line each, written unbuffered): a side that segfaults, is
  killed or hangs writes no run record, and the trace names the check it died in
  (:func:`perfsuite.ab.launch.unfinished`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from perfsuite.ab.launch import TRACE_ENV
from perfsuite.ab.lockstep import GRAIN_ENV, ROOT_ENV, WHOLE_SESSION, Turns
from perfsuite.measure import noise
from perfsuite.measure.loop import Policy
from perfsuite.selection import keep_sweeps

# A side's check warms up for this long (quick mode: 0.5 s, then settling windows for up to
# 3 s, then an untimed sample).  The settling windows and the untimed sample took about a
# fifth of a side's own time on a 2-core VM, and the power of an A/B comes from its rounds.
WARMUP_S = 0.1


class _Turns:
    """The side's turns, registered as a plugin when ``perfsuite ab`` started it in lockstep.

    ``per_sample``: give the turn back between a check's samples too, not only between
    checks.  ``lent``: with samples interleaved, what counts the other side's CPU time
    while it had the turn (None where the noise guard is left as it is).
    """

    def __init__(self, turns: Turns, per_sample: bool, lent: _Lent | None) -> None:
        self.turns = turns
        self.per_sample = per_sample
        self.lent = lent
        self.holding = ""  # the turn this side holds now
        self.whole_session = False

    def take(self, what: str) -> None:
        self.turns.take(what)
        self.holding = what

    def give(self) -> None:
        if self.holding:
            self.turns.give(self.holding)
            self.holding = ""

    def over(self) -> None:
        """The session's last check ended: the turn is kept, its end is said."""
        if self.holding:
            self.turns.over(self.holding)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Checks run in workers cannot take turns one by one: the side waits to run alone.

        It keeps that turn until its process ends, so it asks for no turn per check.
        """
        if _in_workers(session.config):
            self.take(WHOLE_SESSION)
            self.whole_session = True

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Wait for the turn, run the check (set-up, call, tear-down), give the turn back."""
        if self.whole_session:
            return (yield)
        self.take(item.nodeid)
        try:
            return (yield)
        finally:
            if nextitem is not None:
                self.give()
            else:
                self.over()

    @pytest.hookimpl(tryfirst=True)
    def pytest_perfsuite_between_samples(self, nodeid: str) -> Callable[[int], object] | None:
        """Between samples, give the turn to the other side and wait for it back."""
        if self.whole_session or not self.per_sample:
            return None

        def hand_over(sample: int) -> None:
            before = self.lent.others() if self.lent else 0.0
            with _alarm_paused():
                self.give()
                self.take(f"{nodeid}#{sample}")
            if self.lent:
                self.lent.seconds += max(0.0, self.lent.others() - before)

        return hand_over


@contextlib.contextmanager
def _alarm_paused() -> Iterator[None]:
    """Stop the process's real-time alarm while the other side has the turn, then resume it.

    A per-check time limit armed with ``setitimer`` (pytest-timeout's ``signal`` method)
    then counts only this side's own time, not the other side's samples in between.  A limit
    kept by a timer thread (its ``thread`` method) cannot be paused and counts the wait.
    """
    if not hasattr(signal, "setitimer"):
        yield
        return
    left, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left, interval)


class _Lent:
    """The other side's CPU time while this side handed it the turn mid-check.

    The noise guard counts it as the session's own: it is the other half of the pair, run
    between this check's samples.  Anything else the other side's processes did (a data
    loader's worker still busy while this side measures) stays foreign load.
    """

    def __init__(self, root: int) -> None:
        self.root = root  # the pid whose process tree holds both sides
        self.seconds = 0.0

    def others(self) -> float:
        """CPU seconds of the processes under ``root`` outside this session's own tree."""
        return noise.own_cpu_seconds(self.root) - noise.own_cpu_seconds()

    @pytest.hookimpl(wrapper=True)
    def pytest_perfsuite_noise_snapshot(
        self, with_gpus: bool
    ) -> Generator[None, noise.Snapshot | None, noise.Snapshot | None]:
        """The real reading, with the CPU time lent to the other side as the session's own.

        A reading another plugin gives stands as it is.
        """
        reading = yield
        if reading is not None:
            return reading
        real = noise.snapshot(with_gpus)
        return dataclasses.replace(real, own=real.own + self.seconds)


class _Trace:
    """Appends each check's start and normal end to the side's trace file."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _write(self, event: str, nodeid: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.fd, (json.dumps({event: nodeid}) + "\n").encode())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """``start`` before the check; ``end`` only if its protocol returned (not on a kill)."""
        self._write("start", item.nodeid)
        result = yield
        self._write("end", item.nodeid)
        return result

    def pytest_unconfigure(self) -> None:
        """Close the file."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _in_workers(config: pytest.Config) -> bool:
    """Whether this session's checks run in xdist workers."""
    return bool(getattr(config.option, "numprocesses", None)) and (
        getattr(config.option, "dist", "no") != "no"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Take the turns this side was started with (none in an xdist worker)."""
    trace = os.environ.get(TRACE_ENV, "")  # kept: xdist workers append to it too
    if trace:
        with contextlib.suppress(OSError):
            config.pluginmanager.register(_Trace(trace), "perfsuite-ab-trace")
    grain = os.environ.pop(GRAIN_ENV, "")
    root = os.environ.pop(ROOT_ENV, "")
    turns = None if hasattr(config, "workerinput") else Turns.from_environment()
    if turns is None:
        return
    per_sample = grain == "samples"
    pid = noise.in_own_line(root) if per_sample else 0
    lent = _Lent(pid) if pid else None
    config.pluginmanager.register(_Turns(turns, per_sample, lent), "perfsuite-ab-turns")
    if lent is not None:  # the noise guard counts the other side's turns as the session's
        config.pluginmanager.register(lent, "perfsuite-ab-lent")


def pytest_addoption(parser: pytest.Parser) -> None:
    """The selection file of an A/B round."""
    parser.getgroup("perfsuite").addoption(
        "--perf-ab-select",
        metavar="FILE",
        default="",
        help="run only the node ids FILE lists, one per line (perfsuite ab's rounds)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the default mode's cases (before the mode's selection runs), then the selected."""
    keep_sweeps(items)
    path = config.getoption("perf_ab_select")
    if not path:
        return
    wanted = {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}
    kept = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_perfsuite_policy(policy: Policy) -> Policy:
    """A short warm-up; the samples as asked, with no top-ups; no machine probe.

    The machine probe tells a slow spell of the machine from a slower stack when a run is
    compared with stored baselines; a side is compared only with the other side, measured
    beside it, so the pair cancels the spell, and the probe's two readings per check (on a
    2-core VM, a seventh of a round for the two sides) are left out.

    First among the policy hooks (it returns the first answer), so a conftest or another
    plugin of the suite cannot silently replace the A/B's brief sides.
    """
    return dataclasses.replace(
        policy,
        warmup=0,
        warmup_seconds=min(policy.warmup_seconds, WARMUP_S),
        warmup_max_seconds=0.0,
        max_repetitions=policy.repetitions,
        max_seconds=0.0,
        machine_probe=False,
    )
