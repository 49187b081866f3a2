"""The drain list (``drain.json``): what schedulers act on, node by node, with its figures.

Each entry names a node (and GPU) to drain, not confirmed, or to rerun, with the checks
that put it there: its figure, the fleet median, the ratio and z, what its own run flagged.
``confirmation`` holds the nodes to run again and the commands that do
(:mod:`perfsuite.fleet.rerun`).  Each entry's ``reason`` is a sentence of
:mod:`perfsuite.report.fleet`.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from perfsuite.fleet import judge as fj
from perfsuite.fleet.aggregate import Matrix, Unit
from perfsuite.fleet.assess import Fleet, ProfileFleet
from perfsuite.fleet.digests import Taint, throttle_reasons
from perfsuite.fleet.rerun import (
    confirm_again,
    lead_check,
    rechecked_rows,
    rerun_commands,
    rerun_hosts,
    rerun_rows,
    slow_rows,
)
from perfsuite.fleet.status import NodeStatus
from perfsuite.report.fleet import failed_reason, rechecked_reason, rerun_reason, slow_reason

DRAIN_VERSION = 1
# How the drain list names each kind of taint.
TAINT_NAMES = {
    Taint.FOREIGN_LOAD: "foreign-load",
    Taint.GPU_THROTTLED: "gpu-throttled",
    Taint.OTHER: "other",
}
# How the drain list names what a rerun made of a candidate cell.
RECHECK_NAMES = {
    fj.Recheck.MISSING: "missing",
    fj.Recheck.UNJUDGED: "unjudged",
    fj.Recheck.CLEARED: "cleared",
    fj.Recheck.CONFIRMED: "confirmed",
    fj.Recheck.TAINTED: "tainted",
    fj.Recheck.RERUN: "rerun",
}


def drain_list(fleet: Fleet) -> dict[str, Any]:
    """What schedulers act on: each node to drain, with the reason (as NHC gives them).

    Unconfirmed (no rerun judged), ``drain`` holds one run's flags, each ``"confirmed":
    false``, and ``confirmation`` the commands that rerun them and judge the rerun.  With
    reruns, ``drain`` holds the confirmed ones, and ``not_confirmed`` those the rerun did not
    confirm.  ``rerun`` lists the nodes to measure again instead: slow only at readings their
    own runs flagged, or (with reruns) left unsettled by them.  Failed tasks, of the first
    run or a rerun, are drained.
    """
    if fleet.confirmed:
        drain = [
            _rechecked_entry(fleet, p, r) for p, r in rechecked_rows(fleet, fj.Verdict.CONFIRMED)
        ]
        cleared = [
            _rechecked_entry(fleet, p, r) for p, r in rechecked_rows(fleet, fj.Verdict.CLEARED)
        ]
        again = rechecked_rows(fleet, fj.Verdict.RERUN, fj.Verdict.MISSING, fj.Verdict.UNJUDGED)
        rerun = [_rechecked_entry(fleet, p, r) for p, r in again]
    else:
        drain = [_slow_entry(p, s) for p, s in slow_rows(fleet)]
        cleared = []
        rerun = [_rerun_entry(p, r) for p, r in rerun_rows(fleet)]
    drain += [_failed_entry(f, again=False) for f in fleet.failed]
    drain += [_failed_entry(f, again=True) for f in fleet.failed_again]
    return {
        "schema_version": DRAIN_VERSION,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "directory": str(fleet.directory),
        "rule": {
            "alpha": fleet.rule.alpha,
            "tolerance": fleet.rule.tolerance,
            "min_spread": fleet.rule.min_spread,
            "correction": "holm",
        },
        "confirmation": confirmation(fleet),
        "drain": drain,
        "not_confirmed": cleared,
        "rerun": rerun,
    }


def confirmation(fleet: Fleet) -> dict[str, Any]:
    """The drain list's ``confirmation``: whether a rerun confirmed it, and how to rerun."""
    return {
        "confirmed": fleet.confirmed,
        "directories": [str(d) for d in fleet.confirm],
        "nodelist": rerun_hosts(fleet),
        "confirm_again": sorted({p.matrix.units[r.unit].node for p, r in confirm_again(fleet)}),
        "commands": rerun_commands(fleet),
    }


def _finite(x: float) -> float | None:
    """A number for JSON: None for NaN."""
    return float(x) if math.isfinite(x) else None


def _taint_names(taint: int) -> list[str]:
    return [name for kind, name in TAINT_NAMES.items() if kind in Taint(taint)]


def _unit_fields(unit: Unit, profile: str) -> dict[str, Any]:
    """The fields that name a drain entry's node (and GPU) and its profile."""
    return {
        "node": unit.node,
        "label": unit.label,
        "host": unit.host,
        "gpu_index": unit.gpu_index,
        "gpu_serial": unit.gpu_serial,
        "profile": profile,
    }


def _slow_entry(p: ProfileFleet, s: fj.SlowUnit) -> dict[str, Any]:
    m, j = p.matrix, p.judgement
    unit = m.units[s.unit]
    checks: list[dict[str, Any]] = [
        {
            "check": m.checks[c].id,
            "unit": m.checks[c].unit,
            "higher_is_better": m.checks[c].higher_is_better,
            "value": float(m.values[s.unit, c]),
            "fleet_median": float(j.median[c]),
            "ratio": round(float(j.ratio[s.unit, c]), 4),
            "z": round(float(j.z[s.unit, c]), 2),
        }
        for c in s.checks
    ]
    worst = checks[0]
    reason = slow_reason(m.checks[s.checks[0]].id, worst["ratio"], worst["z"], len(checks) - 1)
    return {
        **_unit_fields(unit, m.profile),
        "reason": reason,
        "confirmed": False,
        "checks": checks,
        "record": unit.record,
    }


def _rerun_entry(p: ProfileFleet, r: fj.RerunUnit) -> dict[str, Any]:
    m, j = p.matrix, p.judgement
    unit = m.units[r.unit]
    checks = [
        {
            "check": m.checks[c].id,
            "unit": m.checks[c].unit,
            "higher_is_better": m.checks[c].higher_is_better,
            "value": float(m.values[r.unit, c]),
            "fleet_median": _finite(float(j.median[c])),
            "ratio": _finite(round(float(j.ratio[r.unit, c]), 4)),
            "taint": _taint_names(int(m.taint[r.unit, c])),
            "foreign_cores": _finite(float(m.foreign_cores[r.unit, c])),
            "throttle_reasons": throttle_reasons(int(m.throttle[r.unit, c])),
        }
        for c in r.checks
    ]
    return {
        **_unit_fields(unit, m.profile),
        "reason": rerun_reason(p, r),
        "checks": checks,
        "record": unit.record,
    }


def _confirm_check(p: ProfileFleet, unit: int, col: int) -> dict[str, Any]:
    m, j, c, a = p.matrix, p.judgement, p.confirmation, p.again
    assert c is not None and a is not None

    def reading(src: Matrix, ratio: float, z: float) -> dict[str, Any]:
        return {
            "value": _finite(float(src.values[unit, col])),
            "ratio": _finite(round(ratio, 4)),
            "z": _finite(round(z, 2)),
            "taint": _taint_names(int(src.taint[unit, col])),
        }

    return {
        "check": m.checks[col].id,
        "unit": m.checks[col].unit,
        "higher_is_better": m.checks[col].higher_is_better,
        "fleet_median": _finite(float(j.median[col])),
        "state": RECHECK_NAMES[fj.Recheck(int(c.state[unit, col]))],
        "first": reading(m, float(j.ratio[unit, col]), float(j.z[unit, col])),
        "rerun": reading(a, float(c.ratio[unit, col]), float(c.z[unit, col])),
    }


def _rechecked_entry(fleet: Fleet, p: ProfileFleet, r: fj.Rechecked) -> dict[str, Any]:
    m = p.matrix
    assert p.again is not None
    unit = m.units[r.unit]
    lead = lead_check(p, r)
    remeasured = p.remeasured is not None and bool(p.remeasured[r.unit])
    return {
        **_unit_fields(unit, m.profile),
        "reason": rechecked_reason(p, r, lead),
        "confirmed": r.verdict == fj.Verdict.CONFIRMED,
        "checks": [
            _confirm_check(p, r.unit, k) for k in (lead, *(k for k in r.checks if k != lead))
        ],
        "record": unit.record,
        "rerun_record": p.again.units[r.unit].record if remeasured else "",
        "judged_by": {
            "rerun": r.step,
            "directory": str(fleet.confirm[r.step - 1]),
            "confirmations": r.confirmations,
        },
    }


def _failed_entry(f: NodeStatus, again: bool) -> dict[str, Any]:
    return {
        "node": f.node,
        "label": f.label,
        "host": f.host,
        "gpu_index": None,
        "gpu_serial": "",
        "profile": "",
        "reason": failed_reason(f, again),
        "confirmed": None,
        "checks": [],
        "record": f.record,
        "task": f.task,
        "log": f.log,
    }
