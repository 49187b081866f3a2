"""How a baseline run's samples were taken: its policy, as stored and as checked on load.

A run's policy is stored once per run, and each check's own facts (its sample count and
length, timer, source, bare reference and machine reading) with its entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfsuite.measure import readings
from perfsuite.model import Result
from perfsuite.model.baseline import bare_reference_value
from perfsuite.store.validate import is_number


def run_policy(shared: Any, own: Any) -> dict[str, Any]:
    """A baseline run's policy for one check: the run's, then the check's own facts.

    The check's ``sample_seconds`` is how long its samples lasted (the median), which
    shadows the run's: the length the run asked for is kept as ``sample_target``.
    """
    merged = dict(shared) if isinstance(shared, dict) else {}
    target = merged.get("sample_seconds")
    if isinstance(target, int | float) and not isinstance(target, bool):
        merged["sample_target"] = target
    merged.update(own if isinstance(own, dict) else {})
    return merged


# The policy facts a judgement reads, by the kind each must be; any other key is kept unread.
# A stored list or object where a number belongs would reach the judgement (which compares
# and collects these values) as a traceback in the middle of a run.
_POLICY_SECONDS = (
    "warmup_seconds", "sample_seconds", "sample_target", "max_seconds", "warmup_max_seconds",
    "warmup_settle",
)  # fmt: skip
_POLICY_COUNTS = ("warmup", "repetitions", "max_repetitions", "samples")
_POLICY_TEXT = ("mode", "timer", "source", "launch")
_POLICY_FLAGS = ("references", "machine_probe", "forced")


def policy_problem(policy: Mapping[str, Any]) -> str | None:
    """What is wrong with a stored run policy (``'warmup_seconds' must be ...``), or None."""
    for key, value in policy.items():
        if key in _POLICY_SECONDS and value is not None and not (is_number(value) and value >= 0):
            return f"{key!r} must be a number of seconds >= 0, got {value!r:.40}"
        if key in _POLICY_COUNTS and not (
            isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10**9
        ):
            return f"{key!r} must be a whole number >= 0, got {value!r:.40}"
        if key in _POLICY_TEXT and not (isinstance(value, str) and value.isprintable()):
            return f"{key!r} must be printable text, got {value!r:.40}"
        if key in _POLICY_FLAGS and not isinstance(value, bool):
            return f"{key!r} must be true or false, got {value!r:.40}"
    return None


# Facts that belong to one check's samples (the rest of a run's policy is stored once).
_OWN_POLICY = ("samples", "sample_seconds", "timer", "source", "launch", "reference", "machine")


def own_policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    return {k: policy[k] for k in _OWN_POLICY if k in policy}


def result_policy(result: Result) -> dict[str, Any]:
    """How a result's samples were taken, as recorded with its baseline run."""
    seconds = sorted(result.seconds)
    policy = {
        "samples": len(result.samples),
        "sample_seconds": seconds[len(seconds) // 2] if seconds else None,
        "timer": result.timer,
        "source": dict(result.source).get("kind", ""),
    }
    launch = result.policy.launch if result.policy is not None else ""
    if launch:
        policy["launch"] = launch  # host-launched calls, or a replayed CUDA graph
    reference = bare_reference_value(result.bare_reference)
    if reference is not None:
        policy["reference"] = reference
    machine = readings.stored(result.machine, link=readings.follows_link(result.params))
    if machine is not None:
        policy["machine"] = machine.to_dict()
    return policy
