"""A subscriber waiting for a push is no deadlock: a thread blocked reading a TCP socket whose
other end is a live process outside the job, when nothing is owed to it. And a client that is
owed a reply waits on the one process that owes it (``owing_peers``): named, not "nobody".

Blocked in ``recv`` with no timer, no port and no peer of the job, a process reads "nothing can
wake it" - the same picture as a client whose server never answers its request. The kernel
tells the two apart: tcp_info's last-data ages say which side spoke last (``FdEnd.owed``). A
client that sent a request after the last data it got is owed a reply that does not come; a
subscriber that sent nothing, or whose last exchange was answered, waits for the other end to
have something to say - a feed, a broker, a pub/sub channel on a quiet day. That end is alive
(the wait-for graph's tcp edge to a process outside the job, not stopped, not dead): what it
sends next ends the wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from diag.model import Bundle, FdEnd, WaitGraph, WaitNode
from diag.verdict.features import ProcSignals
from diag.verdict.graph_nodes import node_key
from diag.verdict.tcp_ends import blocked_tcp_end

LIVE_STATES = ("sleeping", "serving", "blocked", "working", "computing", "spinning", "disk")


@dataclass(frozen=True)
class QuietPeer:
    """A process waiting on a TCP socket for a live peer outside the job that owes it nothing."""

    proc: ProcSignals
    end: FdEnd
    peer: WaitNode
    # The peer's CPU over the capture (% of one core), from its holder records' ticks: a
    # server that owes a reply and works is computing it. None where it was not read twice.
    peer_cpu_pct: Optional[float] = None


def holder_cpu_pct(bundle: Bundle, pid: int) -> Optional[float]:
    """An outside process's CPU between the first and last samples that recorded it as the
    holder of an end the job waits on (``FdHolder.cpu_ticks``)."""
    seen = [
        (s.t_s, h.cpu_ticks)
        for s in bundle.samples
        for h in s.fd_holders[:64]
        if h.pid == pid and h.cpu_ticks is not None
    ]  # a holder record names a pid of the host it was read on: one host per capture
    if len(seen) < 2 or seen[-1][0] - seen[0][0] <= 0:
        return None
    (t0, a), (t1, b) = seen[0], seen[-1]
    clk = bundle.host.clk_tck or 100
    return max(0, (b or 0) - (a or 0)) * 100.0 / clk / (t1 - t0)


def quiet_peers(
    bundle: Bundle, waiters: Sequence[ProcSignals], graph: Optional[WaitGraph]
) -> List[QuietPeer]:
    """Each waiter's quiet peer; empty unless every waiter has one."""
    return _outside_peers(bundle, waiters, graph, owed=False)


def owing_peers(
    bundle: Bundle, waiters: Sequence[ProcSignals], graph: Optional[WaitGraph]
) -> List[QuietPeer]:
    """The other case: each waiter's live peer outside the job that owes it a reply - it
    sent a request after the last data it got, and blocks reading the answer; empty unless
    every waiter has one. Only that process can end the wait (``rules.graph.reply_owed``)."""
    return _outside_peers(bundle, waiters, graph, owed=True)


def _outside_peers(
    bundle: Bundle, waiters: Sequence[ProcSignals], graph: Optional[WaitGraph], owed: bool
) -> List[QuietPeer]:
    if graph is None or not waiters:
        return []
    nodes = {n.key: n for n in graph.nodes}
    out: List[QuietPeer] = []
    for p in waiters:
        end = blocked_tcp_end(bundle, p)
        if end is None or end.owed is not owed:
            return []
        me = node_key(p)
        peers = [
            nodes[e.dst]
            for e in graph.edges
            if e.src == me and e.kind == "tcp" and e.dst in nodes and e.dst != me
        ]
        live = [n for n in peers if n.pid and n.state in LIVE_STATES]
        if len(live) != 1 or "outside the job" not in live[0].label:
            return []
        peer = live[0]
        out.append(QuietPeer(p, end, peer, holder_cpu_pct(bundle, peer.pid)))
    return out
