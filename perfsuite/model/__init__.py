"""The data perfsuite measures, judges and stores: the contract between its rooms.

What crosses process boundaries (pytest-xdist workers) or lands in JSON files is a frozen
dataclass with ``to_dict``/``from_dict``; :mod:`perfsuite.model.finished` holds what the end
of a run wrote, within the run's own process.  The run record layout
is a public contract: fields may be added; renaming one takes a new ``SCHEMA_VERSION``, and
the records of earlier versions stay readable.  :mod:`perfsuite.model.result` holds a result
and a run record, :mod:`perfsuite.model.verdicts` their typed verdicts and flags, and
:mod:`perfsuite.model.baseline` a baseline as the judge reads it.
"""

from __future__ import annotations

from perfsuite.model.measured import (
    BareReference,
    Expectation,
    GpuState,
    LoadNotFlagged,
    MachineReading,
    MeasuringPolicy,
    NoiseReading,
    ProbeRates,
)
from perfsuite.model.result import (
    READABLE_VERSIONS,
    RENAMED_IN_2,
    SCHEMA_VERSION,
    Crash,
    Result,
    RunRecord,
    baseline_fields,
    floor_fields,
    noise_flags,
    upgraded,
)
from perfsuite.model.verdicts import (
    BASELINE_VERDICTS,
    FLOOR_VERDICTS,
    BaselineFacts,
    BaselineLimit,
    BaselineVerdict,
    Because,
    FlagKind,
    FloorBecause,
    FloorVerdict,
    Limit,
    LinkSubset,
    LoadCancelled,
    MachineChange,
    ModeDifference,
    NoiseFlag,
    PassesKept,
    ReferenceChange,
    Summary,
    Undetectable,
    Why,
    Work,
    flag_fields,
)

__all__ = [
    "BASELINE_VERDICTS",
    "FLOOR_VERDICTS",
    "READABLE_VERSIONS",
    "RENAMED_IN_2",
    "SCHEMA_VERSION",
    "BareReference",
    "BaselineFacts",
    "BaselineLimit",
    "BaselineVerdict",
    "Because",
    "Crash",
    "Expectation",
    "FlagKind",
    "FloorBecause",
    "FloorVerdict",
    "GpuState",
    "Limit",
    "LinkSubset",
    "LoadCancelled",
    "LoadNotFlagged",
    "MachineChange",
    "MachineReading",
    "MeasuringPolicy",
    "ModeDifference",
    "NoiseFlag",
    "NoiseReading",
    "PassesKept",
    "ProbeRates",
    "ReferenceChange",
    "Result",
    "RunRecord",
    "Summary",
    "Undetectable",
    "Why",
    "Work",
    "baseline_fields",
    "flag_fields",
    "floor_fields",
    "noise_flags",
    "upgraded",
]
