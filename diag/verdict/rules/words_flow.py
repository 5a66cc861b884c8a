"""The rules' words for a framework's own flow control or admission pause (``flow_control``):
a stream writer waiting for its peer to read, a worker paused for memory.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.features import ProcSignals
from diag.verdict.flow_control import FlowStall
from diag.verdict.wording import where

FLOW_OUTRANKS = (
    "a framework paused itself until a named party acts (its peer reads, its memory falls): "
    "that party is where to look, not a lock holder, the outside or the shape of the waits"
)


def _pid(p: ProcSignals) -> str:
    return f"pid {p.pid}" + (f" (rank {p.rank})" if p.rank is not None else "")


def _waiters(waiters: Sequence[ProcSignals]) -> str:
    if not waiters:
        return ""
    named = ", ".join(f"{_pid(p)} in {where(p)}" for p in waiters[:3])
    more = f" (+{len(waiters) - 3})" if len(waiters) > 3 else ""
    return f"; the job waits on it: {named}{more}"


def memory_paused(s: FlowStall, waiters: Sequence[ProcSignals]) -> str:
    """``flow_paused``: a worker its framework paused for memory (or, with no pause line to
    read, one holding more than its pause threshold of its limit)."""
    parts = [f"{s.used} of its {s.limit} limit"] if s.used and s.limit else []
    if s.pause.threshold:
        default = s.pause.default_threshold_pct
        parts.append(
            f"its `{s.pause.threshold}` threshold"
            + (f" is {default:.0f}% by default" if default else "")
        )
    held = f" ({'; '.join(parts)})" if parts else ""
    who = f"{_pid(s.proc)}, a {s.framework} worker,"
    if s.inferred:
        head = (
            f"{who} has most likely paused itself: it holds {s.pct}% of its memory "
            f"limit{held}, past the threshold at which it starts no task until its memory "
            "falls"
        )
        seen = "No pause line was read (its output goes where diag cannot follow it: pass "
        seen += "its log with --log to be sure)"
    else:
        at = f" at {s.pct}% memory" if s.pct is not None else " for memory"
        head = (
            f"{who} paused itself{at}{held}: it starts no task until its memory falls "
            "below the threshold"
        )
        seen = f"Its log: `{s.line[:200]}`"
    return (
        f"{head}{_waiters(waiters)} - stuck on memory, not idle. {seen}. What to do: "
        f"{s.pause.remedy}"
    )


def peer_reader_paused(s: FlowStall) -> str:
    """``flow_paused``: a stream writer waiting for its peer to read."""
    if s.peers:
        party = "; ".join(f"{_pid(q)}, in {where(q)}" for q in s.peers)
        ends = f"the party that can end it: {party}"
    elif s.outside:
        ends = f"its peer is not in this capture ({', '.join(s.outside)})"
    elif s.unconnected:
        return _no_reader(s)
    else:
        ends = (
            "its peer was not found (a unix socket's peer is recorded only when a thread "
            "blocks on that socket itself; `ss -xp` names it)"
        )
    return (
        f"{_pid(s.proc)}: {s.pause.what} - thread {s.tid} waits in `{s.where}` in every "
        f"sample; {ends}. Stalled, not idle: nothing more is sent until it reads. What to do: "
        f"{s.pause.remedy}"
    )


def _no_reader(s: FlowStall) -> str:
    """A writer with no connection at all: its reader died or never came - said as both."""
    ports = ", ".join(str(port) for port in s.unconnected)
    reaped = (
        f"; it has reaped children that ran ({s.reaped_children_s:.2f} s of CPU): if one was "
        "its reader, that reader is dead"
        if s.reaped_children_s > 0
        else ""
    )
    return (
        f"{_pid(s.proc)}: {s.pause.what} - thread {s.tid} waits in `{s.where}` in every "
        f"sample, and no process is connected to it at all: its only sockets listen (port "
        f"{ports}) with no connection. Its reader is gone (a reader killed and reaped leaves "
        f"nothing to see{reaped}) or has not connected yet - the capture cannot tell which. "
        "Nothing more is sent until a reader connects. What to do: find its reader - restart "
        "it if it died (the job's log, the parent's exit handling), start it if it never did"
    )


def paused_reason(s: FlowStall) -> str:
    """A paused process as a suspect."""
    if s.pause.party == "memory" and s.inferred:
        return f"holds {s.pct}% of its {s.limit} memory limit: past its pause threshold"
    if s.pause.party == "memory":
        return f"paused itself for memory ({s.framework}): {s.line[:160]}"
    return f"its stream writer waits in `{s.where}` for its peer to read ({s.framework})"


def stopped_reading_reason(s: FlowStall) -> str:
    """The peer that can end a writer's pause, as a suspect."""
    return f"stopped reading pid {s.proc.pid}'s stream ({s.framework} flow control)"


__all__ = [
    "FLOW_OUTRANKS",
    "memory_paused",
    "paused_reason",
    "peer_reader_paused",
    "stopped_reading_reason",
]
