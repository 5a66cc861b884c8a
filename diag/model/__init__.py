"""Typed, frozen records of one capture, and the one versioned bundle format.

Everything diag writes or reads is one of these records: probes produce them, the classifier
reads them, the renderers turn them into views. They are msgspec Structs because a day-long
watch holds thousands of samples: msgspec encodes and decodes them an order of magnitude faster
than dataclasses + json, validates types on load, and imports in milliseconds.

Compatibility rule: a new field always gets a default, so bundles written by an older diag
still load (``diag report old.json``). Removing or retyping a field bumps ``SCHEMA_VERSION``.

Identity: a process is keyed by ``(host, pid)``; ``host`` is "" for a single-host capture and
is filled in by ``diag merge`` / ``--slurm-job``. Stacks are interned: threads carry a
``stack_id`` into ``Bundle.stacks`` so a stack that stays the same for a day is stored once.
Times ending in ``_s`` are Unix epoch seconds unless the name says otherwise (``duration_s``).
"""

from __future__ import annotations

from diag.model.base import SCHEMA_VERSION, Record
from diag.model.bundle import Bundle
from diag.model.identity import HostEntry, HostInfo, ProcessInfo, Target
from diag.model.judged import (
    ChainEnd,
    CollectiveRecord,
    CpuHoldRecord,
    EdgeKind,
    Evidence,
    LogSignal,
    NodeState,
    RankClass,
    RankCollectives,
    RankLoad,
    RankNcclLog,
    RankPhase,
    RuleMatch,
    StragglerBasis,
    Stragglers,
    Suspect,
    Verdict,
    VerdictChange,
    WaitEdge,
    WaitGraph,
    WaitNode,
)
from diag.model.samples import (
    SYSTEM_LIBRARIES,
    CgroupVersion,
    ClosedConns,
    CpuLimits,
    FdEnd,
    FdHolder,
    FdKind,
    FdMode,
    FileLock,
    FileLockKind,
    Frame,
    FsKind,
    FsWait,
    GpuDevice,
    GpuProcess,
    GpuSample,
    HostLoad,
    IoCounters,
    LogSample,
    NativeLocation,
    NativeSource,
    NativeSpot,
    OpenFile,
    ProbeFailure,
    ProcessSample,
    RasCommunicator,
    RasRank,
    RasSnapshot,
    Sample,
    SchedPolicy,
    ServedConn,
    Stack,
    ThreadSample,
    is_system_library,
    main_thread,
)
from diag.vocab import STATES, Role, VerdictState

# One definition each, in the modules above; re-exported so that a record is imported from
# ``diag.model`` wherever it is defined (and the vocabulary from ``diag.vocab``).
__all__ = [
    "SCHEMA_VERSION",
    "STATES",
    "SYSTEM_LIBRARIES",
    "Bundle",
    "CgroupVersion",
    "ChainEnd",
    "ClosedConns",
    "CollectiveRecord",
    "CpuHoldRecord",
    "CpuLimits",
    "EdgeKind",
    "Evidence",
    "FdEnd",
    "FdHolder",
    "FdKind",
    "FdMode",
    "FileLock",
    "FileLockKind",
    "Frame",
    "FsKind",
    "FsWait",
    "GpuDevice",
    "GpuProcess",
    "GpuSample",
    "HostEntry",
    "HostInfo",
    "HostLoad",
    "IoCounters",
    "LogSample",
    "LogSignal",
    "NativeLocation",
    "NativeSource",
    "NativeSpot",
    "NodeState",
    "OpenFile",
    "ProbeFailure",
    "ProcessInfo",
    "ProcessSample",
    "RankClass",
    "RankCollectives",
    "RankLoad",
    "RankNcclLog",
    "RankPhase",
    "RasCommunicator",
    "RasRank",
    "RasSnapshot",
    "Record",
    "Role",
    "RuleMatch",
    "Sample",
    "SchedPolicy",
    "ServedConn",
    "Stack",
    "StragglerBasis",
    "Stragglers",
    "Suspect",
    "Target",
    "ThreadSample",
    "Verdict",
    "VerdictChange",
    "VerdictState",
    "WaitEdge",
    "WaitGraph",
    "WaitNode",
    "is_system_library",
    "main_thread",
]
