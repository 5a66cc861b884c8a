"""Edges of a framework's own flow control or admission pause (``flow_control``): the party
that can end the pause, drawn as a ``flow`` edge - the peer that must read what a stream
writer waits to send (a process of the capture, or ``outside: unknown peer``), the memory a
paused worker waits to fall (``outside: memory``). A process whose output moves is not
paused, whatever its writer thread waits on between sends: it gets no edge.

A paused process's other edges go: what it does not answer while paused (a scheduler's
request to a paused worker, the worker's own to its scheduler) is the pause's doing, and a
chain followed through them reads a cycle "nothing will end" where memory or a reader will.
"""

from __future__ import annotations

from diag.verdict.flow_control import FlowStall, flow_stalls
from diag.verdict.graph_nodes import _WORK_STATES, OUT_MEMORY, OUT_PEER, _Builder, node_key
from diag.verdict.wording import where


def stall_text(s: FlowStall) -> str:
    """How a stall reads on its edge (and in a chain): what paused, where, on whom."""
    if s.pause.party == "memory" and s.inferred:
        return (
            f"{s.framework}: holds {s.pct}% of its {s.limit} memory limit, past its "
            f"`{s.pause.threshold}` threshold: most likely paused (no pause line read)"
        )
    if s.pause.party == "memory":
        at = f" at {s.pct}% memory" if s.pct is not None else ""
        limit = f" of its {s.limit} limit" if s.limit else ""
        threshold = f" (its `{s.pause.threshold}` threshold)" if s.pause.threshold else ""
        return f"{s.framework}: paused itself{at}{limit}{threshold}: `{s.line[:160]}`"
    return f"{s.pause.what}: thread {s.tid} waits in `{s.where}` in every sample"


def flow_edges(b: _Builder) -> None:
    """One ``flow`` edge per party of each stall of the capture (``flow_stalls``)."""
    paused = set()
    stalls = b.measured.stalls if b.measured is not None else flow_stalls(b.bundle, b.procs)
    for s in stalls:
        key = node_key(s.proc)
        if key not in b.nodes or b.nodes[key].state in _WORK_STATES:
            continue
        if key not in paused:
            paused.add(key)
            b.edges[:] = [e for e in b.edges if e.src != key]
        text = stall_text(s)
        if s.pause.party == "memory":
            b.edge(s.proc, OUT_MEMORY, "flow", text)
            continue
        for q in s.peers:
            b.edge(s.proc, node_key(q), "flow", f"{text}; the peer: {where(q)}")
        if s.outside or not s.peers:
            peers = ", ".join(s.outside) or "no peer found"
            b.edge(s.proc, OUT_PEER, "flow", f"{text}; its peer is not in the capture ({peers})")


__all__ = ["flow_edges", "stall_text"]
