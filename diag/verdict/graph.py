"""Who waits on whom: a wait-for graph of the job's processes, and the chains that end in it.

A wait is only ever ended by someone: a lock by the thread that holds it, a pipe read by the
process holding the write end, a collective by its group, a waitpid by the child, an accept by
the outside. ``wait_graph`` turns the features (``ProcSignals``) into nodes - one per process,
its threads summarised (what the main thread does, how many threads are in each kernel state)
- and edges "this wait can be ended by that node", each with its kind and the evidence it came
from. Then it follows the edges from the participants until no way forward is left: a stopped
or dead process, a cycle, a process that waits on the outside, a computing one.

Pure, and linear in the processes: each node gets at most ``MAX_FANOUT`` edges (the likeliest
enders first), ranks that all wait in one place point at the next ones in a ring, and chains
that end the same way are one line ("ranks 0-2, 4-7 → (peer) → rank 3: stopped ...").

The parts: ``graph_nodes`` (nodes, the builder), ``graph_edges`` and ``graph_fd_edges`` (who
can end each wait), ``graph_chains`` (following them). This module is their face.
"""

from __future__ import annotations

from typing import Collection, Dict, List, Optional, Sequence, Tuple

from diag.model import (
    Bundle,
    WaitEdge,
    WaitGraph,
    WaitNode,
)
from diag.verdict.features import ProcSignals
from diag.verdict.graph_chains import _sccs, chain_lines, follow
from diag.verdict.graph_edges import _build
from diag.verdict.graph_nodes import (
    MAX_FANOUT,
    OUT_CLIENTS,
    Measured,
    _Builder,
    is_outside,
    node_key,
)
from diag.verdict.waits import PEER
from diag.verdict.wording import where


def _gone_nodes(
    b: _Builder, procs: Sequence[ProcSignals], gone: Sequence[Tuple[int, Optional[int], str]]
) -> List[str]:
    keys: List[str] = []
    seen = {p.pid for p in procs}
    waiters = [p for p in procs if p.main_family == PEER and not p.dead and not p.stopped]
    for rank, pid, line in gone:
        if pid is not None and pid in seen:
            continue  # its zombie or exit is in the capture: already a node
        key = f"/{pid}" if pid else f"/gone-rank-{rank}"
        if key in b.nodes:
            continue
        b.nodes[key] = WaitNode(
            key=key,
            pid=pid or 0,
            rank=rank,
            label=f"rank {rank}",
            state="exited",
            detail=f"gone before diag looked; the log: `{line[:120]}`",
        )
        keys.append(key)
        for q in waiters[:MAX_FANOUT]:
            b.edges.append(
                WaitEdge(
                    src=node_key(q),
                    dst=key,
                    kind="peer",
                    evidence=f"waits in {where(q)}; the log says rank {rank} died",
                )
            )
    return keys


def wait_graph(
    bundle: Bundle,
    procs: Sequence[ProcSignals],
    parts: Sequence[ProcSignals],
    working: Collection[Tuple[str, int]] = (),
    gone: Sequence[Tuple[int, Optional[int], str]] = (),
    measured: Optional[Measured] = None,
) -> WaitGraph:
    """The wait-for graph of ``procs``, with chains followed from ``parts``; ``working``: the
    (host, pid) of processes whose output the verdict measured moving; ``gone``: (rank, pid,
    log line) of ranks the job's log says died that no process of the capture is - nodes of
    their own, exited, waited on by the ranks waiting in a collective; ``measured``: what the
    situation measured of ``procs`` that the graph reads too (None: measured here)."""
    b = _build(bundle, procs, frozenset(working), measured)
    gone_keys = _gone_nodes(b, procs, gone)
    out: Dict[str, List[WaitEdge]] = {}
    for e in b.edges:
        out.setdefault(e.src, []).append(e)
    succ = {k: [e.dst for e in es if e.dst != k and not is_outside(e.dst)] for k, es in out.items()}
    comp = _sccs(list(b.nodes), succ)
    members: Dict[int, List[str]] = {}
    for k in b.nodes:
        members.setdefault(comp.get(k, -1), []).append(k)
    starts = [*gone_keys, *(node_key(p) for p in parts)]
    if OUT_CLIENTS in b.nodes:
        starts.insert(0, OUT_CLIENTS)
    chains = [follow(s, b.nodes, out, comp, members) for s in starts if s in b.nodes]
    lines, reasons, line_ends, ends = chain_lines(chains, b.nodes, out, b.by_key)
    return WaitGraph(
        nodes=tuple(b.nodes.values()),
        edges=tuple(b.edges),
        chains=tuple(lines),
        ends=tuple(ends),
        reasons=tuple(reasons),
        line_ends=tuple(line_ends),
    )
