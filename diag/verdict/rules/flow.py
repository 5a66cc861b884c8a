"""The rule of a framework's own flow control or admission pause (``flow_control``): a wait a
named party ends, never "idle, healthy" by default.

May import the base, ``diag.verdict`` and ``rules.words_flow`` only.
"""

from __future__ import annotations

from typing import List, Optional

from diag.model import Suspect
from diag.verdict.features import ProcSignals
from diag.verdict.graph_nodes import node_key
from diag.verdict.rules import words_flow
from diag.verdict.rules.base import Decision, decided
from diag.verdict.situation import Situation


def _waiters_on(s: Situation, p: ProcSignals) -> List[ProcSignals]:
    """The participants whose wait-for edges lead to ``p`` (the graph's, when it was drawn):
    not helpers such as multiprocessing's resource tracker, which hold a pipe to everyone."""
    if s.graph is None:
        return []
    key = node_key(p)
    srcs = {e.src for e in s.graph.edges if e.dst == key and e.src != key}
    return [q for q in s.alive if node_key(q) in srcs]


def flow_paused(s: Situation) -> Optional[Decision]:
    """Nothing of the job's output moves and a framework paused one of its processes until a
    party acts: a stream writer (gRPC's ``_send_response``) waits in every sample for its peer
    to read, or a worker logged that it paused itself for memory (Dask's "Pausing worker")
    and still holds that memory. Read by CPU and stacks alone, the writer's parked thread and
    the paused worker's idle event loop were "idle, healthy, waiting for work" - or their
    clients' unanswered requests "deadlocked". The party is the suspect: the peer that stopped
    reading, the worker whose memory must fall."""
    working = {p.key for p in s.workers + s.writers + s.answering}
    stalls = [
        st
        for st in s.flow_stalls
        if st.proc.key not in working and not st.proc.dead and not st.proc.stopped
    ]
    if not stalls:
        return None
    memory = [st for st in stalls if st.pause.party == "memory"]
    st = memory[0] if memory else stalls[0]
    host = st.proc.key[0]
    if st.pause.party == "memory":
        text = words_flow.memory_paused(st, _waiters_on(s, st.proc))
        suspects = [
            Suspect(
                pid=st.proc.pid, rank=st.proc.rank, host=host, reason=words_flow.paused_reason(st)
            )
        ]
        return decided("slow", 0.6 if st.inferred else 0.75, text, suspects)
    suspects = [
        Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason=words_flow.stopped_reading_reason(st))
        for q in st.peers
    ]
    suspects.append(
        Suspect(pid=st.proc.pid, rank=st.proc.rank, host=host, reason=words_flow.paused_reason(st))
    )
    return decided("slow", 0.7, words_flow.peer_reader_paused(st), suspects)


__all__ = ["flow_paused"]
