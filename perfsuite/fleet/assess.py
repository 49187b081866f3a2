"""A fleet's directory read and judged: each profile's matrix beside its judgement.

Only this module joins the store (:mod:`perfsuite.fleet.aggregate`, the task statuses) to the
judge (:mod:`perfsuite.fleet.judge`); the reports read what it returns.

With reruns (``--confirm``), the candidates (the units the first run flagged or asked to
rerun) are judged again on their rerun readings against the first run's fleet
(:func:`perfsuite.fleet.judge.confirm`); only those confirmed are drained.  Several reruns
may be given, in order: each judges only the candidates the reruns before it left standing
(confirmed, or still to rerun), so that a second rerun of the confirmed nodes drains only
those slow a third time; a node a rerun did not measure keeps its earlier verdict.

A rerun is a new measurement: a ``--confirm`` directory whose records are the fleet's own
(the fleet's directory, a folder of it, a copy of its records) is refused, and so is a
record read from an earlier rerun already; the same directory named twice counts once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfsuite.errors import PerfsuiteError
from perfsuite.fleet import aggregate, judge
from perfsuite.fleet.digests import digest_path
from perfsuite.fleet.labels import FleetError, check_output
from perfsuite.fleet.options import Options, read_manifest
from perfsuite.fleet.status import NodeStatus, read_statuses
from perfsuite.judge import outcome
from perfsuite.store.files import same_file


@dataclass(frozen=True)
class ProfileFleet:
    """One hardware profile's units, judged only against each other."""

    matrix: aggregate.Matrix
    judgement: judge.Judgement
    slow: tuple[judge.SlowUnit, ...]
    rerun: tuple[judge.RerunUnit, ...]  # to measure again; none of them flagged
    # With reruns: their readings over the first run's units x checks, which units they
    # measured, the judgement of the candidates on them, and each candidate's verdict (one
    # missing because its rerun task failed is left out: it is failed).
    again: aggregate.Matrix | None = None
    remeasured: np.ndarray | None = None  # bool per unit: a rerun has its record
    # ``again`` holds, for each unit, the readings of the rerun that judged it last.
    confirmation: judge.Confirmation | None = None
    rechecked: tuple[judge.Rechecked, ...] = ()

    @property
    def judged(self) -> bool:
        """Whether enough units share this profile to judge any of them."""
        return len(self.matrix.units) >= judge.MIN_UNITS

    def verdict_of(self, *verdicts: judge.Verdict) -> tuple[judge.Rechecked, ...]:
        """The candidates whose rerun gave one of ``verdicts``."""
        return tuple(r for r in self.rechecked if r.verdict in verdicts)


@dataclass(frozen=True)
class Fleet:
    """Everything ``perfsuite fleet report`` shows."""

    directory: Path
    rule: judge.Rule
    profiles: tuple[ProfileFleet, ...]
    failed: tuple[NodeStatus, ...]  # tasks of the fleet run that wrote no record
    confirm: tuple[Path, ...] = ()  # the reruns judged, in order; () when unconfirmed
    failed_again: tuple[NodeStatus, ...] = ()  # tasks of the reruns that wrote no record
    asked: Options | None = None  # what the first fleet run was asked, when it kept it

    @property
    def nodes(self) -> int:
        """Distinct nodes (hosts) with a record: the tasks of one host are one node."""
        return len({u.node for p in self.profiles for u in p.matrix.units})

    @property
    def tasks(self) -> int:
        """Distinct tasks (labels) with a record."""
        return len({u.label for p in self.profiles for u in p.matrix.units})

    @property
    def failed_nodes(self) -> int:
        """Distinct nodes with a failed task in the first run (see :func:`node_keys`)."""
        return len(node_keys(self.failed))

    @property
    def failure_nodes(self) -> int:
        """Distinct nodes with a failed task, in the first run or a rerun."""
        return len(node_keys(self.failures))

    @property
    def all_nodes(self) -> int:
        """Distinct nodes of the first run: with a record, or with a failed task."""
        named = {u.node for p in self.profiles for u in p.matrix.units}
        return len(named | node_keys(self.failed))

    @property
    def confirmed(self) -> bool:
        """Whether a rerun confirmed the flags (else they are one run's)."""
        return bool(self.confirm)

    @property
    def flagged(self) -> int:
        """Units the first run flagged slow, over every profile."""
        return sum(len(p.slow) for p in self.profiles)

    @property
    def drained(self) -> int:
        """Units slow: confirmed by a rerun, or (unconfirmed) flagged by the first run."""
        if not self.confirmed:
            return self.flagged
        return sum(len(p.verdict_of(judge.Verdict.CONFIRMED)) for p in self.profiles)

    @property
    def rerun(self) -> int:
        """Units to measure again (a tainted slow-looking reading, or no rerun of a flag)."""
        if not self.confirmed:
            return sum(len(p.rerun) for p in self.profiles)
        again = (judge.Verdict.RERUN, judge.Verdict.MISSING, judge.Verdict.UNJUDGED)
        return sum(len(p.verdict_of(*again)) for p in self.profiles)

    @property
    def failures(self) -> tuple[NodeStatus, ...]:
        """The tasks that wrote no record, in the first run or a rerun."""
        return self.failed + self.failed_again

    @property
    def exit_status(self) -> int:
        """A node slow or failed: regressed; else one to rerun: inconclusive; else OK.

        A fleet with a reading it could not judge is no pass.
        """
        if self.drained or self.failures:
            return outcome.EXIT_REGRESSED
        return outcome.EXIT_INCONCLUSIVE if self.rerun else outcome.EXIT_OK


def node_keys(statuses: tuple[NodeStatus, ...]) -> set[str]:
    """The nodes of tasks, by name: a task that never said where it ran is one of its own."""
    return {s.node or f"task {s.task}" for s in statuses}


def assess(
    directory: Path,
    rule: judge.Rule,
    workers: int | None = None,
    confirm: tuple[Path, ...] = (),
) -> Fleet:
    """Read the fleet's records and task statuses under ``directory``, and judge them.

    ``confirm``: reruns of its candidates, each a fleet run's directory, oldest first.
    A fleet whose tasks failed is judged on what it has (its failed nodes are drained) even
    with no record, or too few to compare.
    """
    failed = tuple(s for s in read_statuses(directory) if s.failed)
    if failed and directory.is_dir() and not aggregate.record_paths(directory):
        matrices = []
    else:
        matrices = aggregate.load(directory, workers)
    if not failed:  # failed nodes are a verdict; without them, too few nodes are none
        _check_comparable(directory, matrices)
    profiles = []
    for m in matrices:
        j = judge.judge(m.values, m.higher_is_better, m.within, rule, m.tainted)
        profiles.append(ProfileFleet(m, j, tuple(judge.slow_units(j)), tuple(judge.rerun_units(j))))
    asked = read_manifest(directory)
    if not confirm:
        return Fleet(directory, rule, tuple(profiles), failed, asked=asked)
    confirm = distinct(confirm)
    again, failed_again = _reruns(directory, matrices, failed, confirm, workers)
    gone = {s.label for s in failed_again if s.label}
    confirmed = []
    for p in profiles:
        laid, remeasured, c = _chain(p, again)
        kept = tuple(r for r in judge.rechecked_units(c)
                     if not (r.verdict == judge.Verdict.MISSING
                             and p.matrix.units[r.unit].label in gone))  # fmt: skip
        confirmed.append(
            ProfileFleet(p.matrix, p.judgement, p.slow, p.rerun, laid, remeasured, c, kept)
        )
    return Fleet(directory, rule, tuple(confirmed), failed, confirm, failed_again, asked)


def _check_comparable(directory: Path, matrices: list[aggregate.Matrix]) -> None:
    """Refuse a fleet with too few nodes of any one profile to tell a slow one."""
    labels = sorted({u.label for m in matrices for u in m.units})
    if len(labels) == 1 and max(len(m.units) for m in matrices) < judge.MIN_UNITS:
        raise PerfsuiteError(
            f"{directory}: a fleet of one node ({labels[0]}): nothing to compare it with; "
            f"a fleet report needs {judge.MIN_UNITS} or more nodes of one profile"
        )
    if all(len(m.units) < judge.MIN_UNITS for m in matrices):
        sizes = ", ".join(f"{len(m.units)} of {m.profile}" for m in matrices)
        raise PerfsuiteError(
            f"{directory}: too few nodes to tell a slow one ({sizes}); a fleet is judged "
            f"profile by profile and needs {judge.MIN_UNITS} or more nodes of one profile"
        )


def distinct(directories: tuple[Path, ...]) -> tuple[Path, ...]:
    """The directories in order, each once: one named twice (by any path) counts once."""
    seen: set[Path] = set()
    out = []
    for d in directories:
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            out.append(d)
    return tuple(out)


def _reruns(
    directory: Path,
    first: list[aggregate.Matrix],
    failed: tuple[NodeStatus, ...],
    confirm: tuple[Path, ...],
    workers: int | None,
) -> tuple[list[list[aggregate.Matrix]], tuple[NodeStatus, ...]]:
    """Each rerun's matrices (oldest first) and failed tasks, checked against the first run.

    A rerun must be of this fleet: every node it measured has a record (or a failed task) in
    the first run, of the same hardware profile.
    """
    profile_of = {u.label: m.profile for m in first for u in m.units}
    failed_first = {s.label for s in failed}
    read: dict[str, str] = {u.run_id: str(directory) for m in first for u in m.units}
    out: list[list[aggregate.Matrix]] = []
    failed_again: list[NodeStatus] = []
    for d in confirm:
        if d.resolve() == directory.resolve():
            raise FleetError(f"--confirm {d}: that is the fleet's own run, not a rerun of it")
        if not d.is_dir():
            raise FleetError(f"--confirm {d}: no such directory")
        statuses = read_statuses(d)
        if not aggregate.record_paths(d):
            if not statuses:
                raise FleetError(
                    f"--confirm {d}: no run records and no fleet task statuses in it: run "
                    "the flagged nodes again into it (perfsuite fleet run --nodelist ...)"
                )
            out.append([])  # every task of the rerun failed
        else:
            rerun = aggregate.load(d, workers)
            for m in rerun:
                for u in m.units:
                    if read.get(u.run_id, str(d)) != str(d):
                        raise FleetError(
                            f"--confirm {d}: its record {u.record} is run {u.run_id}, already "
                            f"read from {read[u.run_id]}: a rerun is a new run of the nodes "
                            "(perfsuite fleet run --nodelist ... --dir DIR/confirm)"
                        )
                    read[u.run_id] = str(d)
                    was = profile_of.get(u.label)
                    if was is None and u.label not in failed_first:
                        raise FleetError(
                            f"--confirm {d}: node {u.label!r} has no record in {directory}: "
                            "not a rerun of this fleet"
                        )
                    if was is not None and was != m.profile:
                        raise FleetError(
                            f"--confirm {d}: node {u.label!r} ran as profile {m.profile!r}, "
                            f"but as {was!r} in {directory}: a rerun must measure the same "
                            "hardware"
                        )
            out.append(rerun)
        failed_again += [s for s in statuses if s.failed]
    return out, tuple(failed_again)


def _chain(
    p: ProfileFleet, reruns: list[list[aggregate.Matrix]]
) -> tuple[aggregate.Matrix, np.ndarray, judge.Confirmation]:
    """Judge the reruns in order, each on the candidates the ones before it left standing.

    Returns the readings that judged each unit last over the first run's units x checks,
    which units any rerun measured, and the last confirmation.
    """
    first = p.matrix
    laid = aggregate.blank(first)
    remeasured = np.zeros(len(first.units), dtype=bool)
    c: judge.Confirmation | None = None
    for rerun in reruns:
        this = aggregate.blank(first)
        present = np.zeros(len(first.units), dtype=bool)
        for m in rerun:
            if m.profile != first.profile:
                continue
            top, here = aggregate.align(first, m)
            this = aggregate.overlay(this, top, here)
            present |= here
        if c is not None:
            present &= judge.standing(c).any(axis=1)  # the others keep their verdicts
            this = aggregate.overlay(aggregate.blank(first), this, present)
        c = judge.confirm(p.judgement, this.values, first.higher_is_better, this.tainted, c)
        laid = aggregate.overlay(laid, this, present)
        remeasured |= present
    assert c is not None
    return laid, remeasured, c


def check_outputs(
    directory: Path, confirm: tuple[Path, ...], drain: Path, html: Path | None
) -> None:
    """Refuse, before anything is read or written, outputs that would destroy an input.

    An output may not be a file the report reads (a record, its digest, a task's status or
    the fleet run's manifest, of DIR or a rerun), nor the hostfile the fleet ran on (its
    rerun command names it), nor a ``.json`` file inside DIR or a rerun (the next report
    would read it as a record), nor the other output.  DIR/drain.json, the default, is the
    one JSON file there the report never reads.  Each output must be writable as well (a
    regular file or none yet, in a folder that takes files): the drain list is never
    written when the page then cannot be.
    """
    outputs = [("--drain", drain)] + ([("--html", html)] if html is not None else [])
    if html is not None and (drain.absolute() == html.absolute() or same_file(drain, html)):
        raise FleetError(f"--drain {drain} and --html {html} name the same file")
    folders = (directory, *confirm)
    for what, path in outputs:
        if path.is_dir():
            raise FleetError(f"{what} {path}: a directory; name a file")
        for read in _inputs(folders):
            if same_file(path, read):
                raise FleetError(f"{what} {path}: that is {read}, an input of this report")
        for folder in folders:
            if _inside(path, folder) and path.name.endswith(".json"):
                if path.absolute() == (directory / aggregate.OUTPUTS[0]).absolute():
                    continue
                raise FleetError(
                    f"{what} {path}: inside {folder}, where the report reads every .json file "
                    "as a record: the next report would fail; write it elsewhere"
                )
    for what, path in outputs:
        check_output(what, path)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (resolved, links followed) lies under ``folder``."""
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def _inputs(folders: tuple[Path, ...]) -> list[Path]:
    """Every file the report reads under ``folders``: records, digests, the nodes' files."""
    found: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        records = aggregate.record_paths(folder)
        found += records + [digest_path(r) for r in records]
        found += sorted((folder / aggregate.NODES_DIR).glob("*"))
        asked = read_manifest(folder)
        if asked is not None and asked.hostfile is not None:
            found.append(asked.hostfile)
    return found
