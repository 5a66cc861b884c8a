"""Edges between the job's processes read from their waits: peers in a collective (a ring),
children, a process's own threads (locks, queues, results), requests to a server, the doors a
feeder thread opens, and ``_build``, which draws them all.
"""

from __future__ import annotations

from typing import Collection, Dict, FrozenSet, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import (
    Bundle,
    EdgeKind,
    WaitEdge,
    WaitNode,
)
from diag.verdict.features import ProcSignals
from diag.verdict.graph_fd_edges import (
    _fd_edges,
    _file_lock_edges,
    _link_text,
    _stdin_from_job,
    _thread_fd_edges,
)
from diag.verdict.graph_flow_edges import flow_edges
from diag.verdict.graph_nodes import (
    _DEAD_STATES,
    _PIPE_READS,
    FUTEX_PRIVATE,
    MAX_FANOUT,
    OUT_CLIENTS,
    OUT_NETWORK,
    OUT_PEER,
    OUT_STDIN,
    OUT_STORE,
    OUT_TIMER,
    OUTSIDE_JOB,
    Measured,
    _Builder,
    _detail,
    _family_of,
    _feeder_door,
    _last_alive,
    _lock_cycle,
    _main_thread,
    _parent_of,
    _request_servers,
    is_outside,
    label_of,
    node_key,
    node_state,
    threads_text,
)
from diag.verdict.participants import is_rank_helper, serving_ports
from diag.verdict.rendezvous import store_joins
from diag.verdict.self_wait import undrained_puts
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import CHILD, FILE_LOCK, LOCK, PEER, RESULT, SLEEP
from diag.verdict.wording import where
from diag.vocab import WaitKind


def _peer_edges(b: _Builder, ranks: Sequence[ProcSignals]) -> None:
    """A rank in a collective waits for the ranks of its group that are not in the same wait;
    when they all wait in one place, on each other (a ring: each on the next ones)."""

    def wait_key(q: ProcSignals) -> str:
        if q.dead or q.stopped or q.main_family != PEER:
            return "other:" + node_key(q)
        return where(q)

    buckets: Dict[str, List[ProcSignals]] = {}
    for q in ranks:
        buckets.setdefault(wait_key(q), []).append(q)

    def priority(item: Tuple[str, List[ProcSignals]]) -> Tuple[int, int]:
        key, members = item
        if not key.startswith("other:"):
            return 2, len(members)
        state = b.nodes[node_key(members[0])].state
        return (0 if state in _DEAD_STATES else 1), 1

    ordered = sorted(buckets.items(), key=priority)
    # Each rank's place in its bucket, by identity: ``list.index`` compared every field of
    # every rank before it (16,384 ranks in one ring: 134 million dataclass compares).
    at_of = {id(q): i for members in buckets.values() for i, q in enumerate(members)}
    for p in ranks:
        if p.dead or p.stopped or p.main_family != PEER:
            continue
        mine = wait_key(p)
        targets: List[ProcSignals] = []
        for key, members in ordered:
            if key == mine:
                continue
            targets.extend(members[: MAX_FANOUT - len(targets)])
            if len(targets) >= MAX_FANOUT:
                break
        if targets:
            for q in targets:
                b.edge(p, node_key(q), "peer", f"waits in {where(p)}; {label_of(q)} is not in it")
            continue
        group = buckets[mine]
        if len(group) < 2:
            continue
        at = at_of[id(p)]
        ring = [group[(at + k) % len(group)] for k in range(1, min(len(group), MAX_FANOUT + 1))]
        for q in ring:
            b.edge(p, node_key(q), "peer", f"waits in {where(p)} like every rank it waits for")


def _thread_queue(b: _Builder, p: ProcSignals) -> bool:
    """The main thread waits on a thread queue (``queue.Queue``) or a thread pool's future
    (``concurrent.futures``), not a multiprocessing one: another thread of the process fills
    it, so no other process can end the wait."""
    ps = b.last.get(p.key)
    main = next((t for t in ps.threads if t.tid == ps.pid), None) if ps is not None else None
    if main is None or p.main_wait is None or p.main_wait.native:
        return False
    for f in frames_of(b.bundle, main.stack_id)[:8]:
        if "multiprocessing" in f.filename or "/pool.py" in f.filename:
            return False
        if f.filename.endswith(union.QUEUE_FILES) or "concurrent/futures" in f.filename:
            return not b.children.get((p.key[0], p.pid)) or f.filename.endswith(union.QUEUE_FILES)
    return False


def _main_futex_op(b: _Builder, p: ProcSignals) -> Optional[int]:
    main = _main_thread(b, p)
    return main.futex_op if main is not None else None


def _leaked_pipe_edges(b: _Builder, p: ProcSignals, here: str) -> None:
    """``Popen.communicate`` / ``run(capture_output=True)`` reads its child's pipes until EOF,
    and EOF needs *every* writer closed: a child that exited but left a background process
    holding its stdout (``sh -c "server &"``) keeps the parent waiting for that process, not
    for the child. Its read ends (fd 3 and up) whose write end a live process still holds."""
    ps = b.last.get(p.key)
    if ps is None or not ps.fd_ends:
        return
    by_inode, _ = b.ends_index()
    for end in ps.fd_ends:
        if end.kind not in ("pipe", "fifo") or end.mode != "r" or end.fd < 3:
            continue
        what = f"reads fd {end.fd} ({_link_text(end)}) in {here} until EOF; its child exited"
        for q, e in by_inode.get((p.key[0], end.inode), []):
            if q is not p and not q.dead and e.mode in ("w", "rw"):
                b.edge(p, node_key(q), "pipe", f"{what}, but {label_of(q)} holds the write end")
        writers = [h for h in b.outside_holders(p.key[0], end.inode) if h.mode in ("w", "rw")]
        for h in writers[:MAX_FANOUT]:
            dst = b.holder_node(p.key[0], h, f"the write end of {_link_text(end)}")
            b.edge(
                p,
                dst,
                "pipe",
                f"{what}, but pid {h.pid} {h.name} {OUTSIDE_JOB} holds the write end",
            )


# The kinds of a main-thread wait that read as a queue, a socket, a lock (``_own_edges``).
_QUEUE_KINDS: FrozenSet[WaitKind] = frozenset({"queue", "write-full"})
_SOCKET_KINDS: FrozenSet[WaitKind] = frozenset({"event-loop", "accept", "socket-read"})
_LOCK_KINDS: FrozenSet[WaitKind] = frozenset({"lock", "condition"})


def _own_edges(b: _Builder, p: ProcSignals) -> None:
    """The edges of one process's main-thread wait (and its other threads' lock waits)."""
    w = p.main_wait
    if p.dead or p.stopped or w is None or w.kind is None or p.main_family == PEER:
        return  # peers: _peer_edges
    first_edge = len(b.edges)
    kind, fam, here = w.kind, p.main_family, where(p)
    main = _main_thread(b, p)
    if kind == "blocked" and main is not None and (main.wchan or "").startswith(_PIPE_READS):
        kind = "queue"  # a native read of a pipe: whoever holds the write end ends it
    if kind == FILE_LOCK:
        _file_lock_edges(b, p)
    elif kind == "stdin" and not _stdin_from_job(b, p):
        pass  # input someone types or pipes in from outside: a door (below)
    elif fam != CHILD and kind != "fifo-open" and _fd_edges(b, p):
        pass  # the fd it blocks on, matched by inode: who holds the other end
    elif fam == CHILD:
        kids = b.rank_order(_family_of(b, p, trackers=True))
        for k in kids:
            b.edge(p, node_key(k), "child", f"waits for its children in {here}")
        if all(k.dead for k in kids):
            _leaked_pipe_edges(b, p, here)
    elif fam == RESULT or kind in _QUEUE_KINDS:
        _queue_edges(b, p, kind, here)
    elif fam == LOCK or kind == "blocked":
        _lock_edges(b, p, kind, here)
    elif kind == "fifo-open":
        b.edge(p, OUT_PEER, "outside", "opens a named pipe: waits for a process to open its end")
    elif fam == SLEEP:
        b.edge(p, OUT_TIMER, "outside", f"sleeps in {here}: a timer ends it")
    elif kind in _SOCKET_KINDS:
        _socket_edges(b, p, kind, here)
    if kind == "stdin" and len(b.edges) == first_edge:
        b.edge(p, OUT_STDIN, "outside", f"reads stdin (fd 0) in {here}")
    _thread_and_client_edges(b, p, first_edge, here)


def _queue_edges(b: _Builder, p: ProcSignals, kind: WaitKind, here: str) -> None:
    """A wait for a result, on a queue or on a full pipe: the family member (or parent) that
    can answer it, else its own threads - and the door a feeder thread of its own opens."""
    w, fam, parent = p.main_wait, p.main_family, _parent_of(b, p)
    edge_kind: EdgeKind = "result" if fam == RESULT else "queue"
    if kind == "write-full" or (w is not None and w.native and kind == "queue"):
        edge_kind = "pipe"
    kids = b.rank_order(_family_of(b, p))
    if _thread_queue(b, p):
        kids = []  # queue.Queue / a thread pool's future: only its own threads answer it
    elif kind == "write-full" and parent is not None:
        kids = [parent]  # whoever started it with stdout=PIPE likely holds the read end
    elif not kids and parent is not None and fam != RESULT:
        kids = [parent]
    what = {
        "result": "waits for a result in",
        "queue": "waits on a queue in",
        "pipe": "blocks on a pipe in",
    }[edge_kind]
    for k in kids:
        b.edge(p, node_key(k), edge_kind, f"{what} {here}; {label_of(k)} can answer it")
    if not kids:
        b.edge(p, node_key(p), edge_kind, f"{what} {here}; only its own threads can answer it")
        feeder = None if _thread_fd_edges(b, p) else _feeder_door(b, p)
        if feeder is not None:
            b.edge(p, feeder[0], "outside", feeder[1])


def _undrained(b: _Builder) -> FrozenSet[Tuple[str, int]]:
    """The processes whose main thread puts on a full queue no thread drains (once a graph)."""
    if b.undrained is None:
        b.undrained = frozenset(u.key for u in undrained_puts(b.bundle, b.procs))
    return b.undrained


def _lock_edges(b: _Builder, p: ProcSignals, kind: WaitKind, here: str) -> None:
    """A lock or an opaque native block: a shared futex points at the family; a private lock
    at a thread of its own that can release it, else at itself."""
    op = _main_futex_op(b, p)
    parent = _parent_of(b, p)
    if op is not None and not op & FUTEX_PRIVATE and kind in _LOCK_KINDS:
        shared = [*([parent] if parent else []), *_family_of(b, p)]
        for k in b.rank_order(shared):
            b.edge(p, node_key(k), "lock", f"waits on a shared futex in {here}")
        return
    if kind == "blocked" and not p.lock_waiters:
        return
    cycle = _lock_cycle(p)
    # A put on a full queue no thread drains (``self_wait.undrained_puts``): its timer
    # threads woke over and over and took nothing - no door.
    feeder = None if cycle or p.key in _undrained(b) else _feeder_door(b, p)
    if not cycle and _thread_fd_edges(b, p):
        pass  # another thread of its own waits on a process that can end its wait
    elif feeder is not None:  # another thread of its own runs again and can end it
        why = feeder[1].replace("fill it", "release or set it")
        b.edge(p, feeder[0], "outside", f"waits on a lock or event in {here}; {why}")
    else:
        b.edge(p, node_key(p), "lock", f"waits on a lock in {here}: only its own threads hold it")


def _socket_edges(b: _Builder, p: ProcSignals, kind: WaitKind, here: str) -> None:
    """An event loop, an accept or a socket read: a server of the job holding its request,
    else its own port (the network), else a timer, else a peer that never answers."""
    w = p.main_wait
    servers = _request_servers(b, p) if kind == "socket-read" else []
    for q, port in servers:
        b.edge(
            p,
            node_key(q),
            "request",
            f"reads a socket in {here}; {label_of(q)} holds an unanswered request "
            f"from the job on :{port}",
        )
    own_ports = serving_ports([p])
    if servers:
        pass  # a server of the job holds its request: the chain goes on there
    elif own_ports:
        ports = ", ".join(f":{port}" for port in own_ports[:3])
        b.edge(p, OUT_NETWORK, "outside", f"waits in {here} and listens on {ports}")
    elif (w is not None and w.timed is not False) or p.main_wakeups > 0:
        b.edge(p, OUT_TIMER, "outside", f"waits in {here} with a timeout (or woke)")
    else:
        b.edge(p, OUT_PEER, "outside", f"waits in {here}: no timeout, no port - a peer")


def _thread_and_client_edges(b: _Builder, p: ProcSignals, first_edge: int, here: str) -> None:
    """What the main thread's wait leaves out: other threads stuck on locks, a timed wait that
    wakes by itself, and clients whose requests wait unanswered on this process."""
    w = p.main_wait
    me = node_key(p)
    mine = b.edges[first_edge:]
    # Threads blocked on one lock (no cycle) while the main thread waits on a door - a timer,
    # a port, a timeout - or on another of its threads: the main thread runs again and may
    # release it. Two or more locks held against each other: only a lock-order cycle.
    timed = w is not None and w.timed is True
    door = any(is_outside(e.dst) for e in mine) or timed
    if p.lock_waiters and not any(e.dst == me for e in mine) and (_lock_cycle(p) or not door):
        n = len(p.lock_waiters)
        addrs = len({a for _, a, _ in p.lock_waiters})
        b.edge(p, me, "lock", f"{n} thread(s) blocked on {addrs} lock(s) in every sample")
    if len(b.edges) == first_edge and timed:
        b.edge(p, OUT_TIMER, "outside", f"waits in {here} with a timeout: it wakes by itself")
    if p.stale_requests:
        b.add_outside(OUT_CLIENTS)
        ports = ", ".join(f":{port}" for port in p.stale_ports[:3])
        b.edges.append(
            WaitEdge(
                src=OUT_CLIENTS,
                dst=me,
                kind="request",
                evidence=f"{p.stale_requests} request(s) to {ports} unanswered "
                f"{p.stale_age_s:.0f}+ s",
            )
        )
        _backend_edges(b, p)


def _backend_edges(b: _Builder, p: ProcSignals) -> None:
    """A server holding unanswered requests waits on whom it hands them to: the processes of
    the job at the other end of its unix sockets (vLLM's API server -> EngineCore over zmq
    ipc://) and of its TCP connections that are not its own clients. Its event loop is idle
    in epoll; the request waits there."""
    ps = b.last.get(p.key)
    if ps is None or not ps.fd_ends:
        return
    by_inode, by_local = b.ends_index()
    own_ports = set(serving_ports([p]))
    found: Dict[str, Tuple[ProcSignals, EdgeKind, str]] = {}
    for e in ps.fd_ends:
        if e.kind == "unix" and e.peer_inode:
            for q, _ in by_inode.get((p.key[0], e.peer_inode), []):
                if q is not p:
                    found.setdefault(node_key(q), (q, "unix", f"unix socket:[{e.inode}]"))
        elif e.kind == "tcp" and e.remote and e.local:
            _, _, port = e.local.rpartition(":")
            if port.isdigit() and int(port) in own_ports:
                continue  # one of its own clients
            via = f"tcp {e.local} → {e.remote}"
            matched = [
                q for q, qe in by_local.get(e.remote, []) if q is not p and qe.remote == e.local
            ]
            for q in matched:
                found.setdefault(node_key(q), (q, "tcp", via))
            if not matched and e.peer_inode:  # a backend outside the job (found by its inode)
                for dst, h in b.holder_nodes(p.key[0], e.peer_inode, f"the other end of {via}"):
                    b.edge(
                        p,
                        dst,
                        "tcp",
                        f"holds {p.stale_requests} unanswered request(s); its {via} goes to "
                        f"pid {h.pid} {h.name} {OUTSIDE_JOB}",
                    )
    for q in b.rank_order(q for q, _, _ in found.values()):
        _, kind, via = found[node_key(q)]
        b.edge(
            p,
            node_key(q),
            kind,
            f"holds {p.stale_requests} unanswered request(s); hands them to {label_of(q)} "
            f"over {via}",
        )


def _build(
    bundle: Bundle,
    procs: Sequence[ProcSignals],
    working: Collection[Tuple[str, int]] = (),
    measured: Optional[Measured] = None,
) -> _Builder:
    last = _last_alive(bundle, {p.key for p in procs})
    b = _Builder(bundle=bundle, procs=procs, last=last, measured=measured)
    for p in procs:
        key = node_key(p)
        b.by_key[key] = p
        if p.info.ppid is not None:
            b.children.setdefault((p.key[0], p.info.ppid), []).append(p)
        state = node_state(p, p.key in working)
        b.nodes[key] = WaitNode(
            key=key,
            pid=p.pid,
            host=p.key[0],
            rank=None if is_rank_helper(p) else p.rank,  # a rank's child is no rank
            label=label_of(p),
            state=state,
            detail=_detail(p, state, threads_text(bundle, p, b.last.get(p.key))),
        )
    ranks = [p for p in procs if p.rank is not None and not is_rank_helper(p)]
    peers = [p for p in procs if p.main_family == PEER and p.rank is None and not p.dead]
    _peer_edges(b, ranks + peers)
    _store_join_edges(b)
    for p in procs:
        _own_edges(b, p)
    flow_edges(b)  # frameworks' own flow control and admission pauses
    return b


def _store_join_edges(b: _Builder) -> None:
    """Ranks still connecting to a c10d store no process of the capture hosts
    (``rendezvous.store_joins``): the store's host ends their wait when it listens - outside
    the capture, as a server's clients are."""
    join = b.measured.store_join if b.measured is not None else store_joins(b.bundle, b.procs)
    if join is None:
        return
    for p in join.joiners:
        b.edge(
            p,
            OUT_STORE,
            "outside",
            f"connects to the c10d store at {join.endpoint()} in {where(p)}: its host (rank "
            "0, or torchrun's agent) ends the wait when it listens",
        )
