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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import (
    Bundle,
    EdgeKind,
    FdEnd,
    FdHolder,
    NodeState,
    ProcessSample,
    ThreadSample,
    Verdict,
    WaitEdge,
    WaitGraph,
    WaitNode,
)
from diag.text.units import rank_set, size
from diag.verdict.evidence import SPIN_PCT
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.file_locks import holder_label, lock_waits
from diag.verdict.participants import is_rank_helper, serving_ports
from diag.verdict.sources import Context
from diag.verdict.thread_wait import frames_of, thread_wait
from diag.verdict.waits import CHILD, FILE_LOCK, LOCK, PEER, RESULT, SERVE, SLEEP
from diag.verdict.wording import where

MAX_FANOUT = 8  # edges per node: the likeliest enders first
MAX_DEPTH = 32  # steps a chain follows before giving up
MAX_CHAINS = 20  # chain lines kept (grouped: one line per way of ending)

OUTSIDE = "outside:"
OUT_CLIENTS = OUTSIDE + "clients"
OUT_NETWORK = OUTSIDE + "network"
OUT_TIMER = OUTSIDE + "timer"
OUT_STDIN = OUTSIDE + "stdin"
OUT_PEER = OUTSIDE + "peer"
_OUTSIDE_NODES: Dict[str, Tuple[str, str]] = {
    OUT_CLIENTS: ("outside: clients", "clients outside the job wait for answers"),
    OUT_NETWORK: ("outside: requests", "a request or connection from outside the job"),
    OUT_TIMER: ("outside: timer", "a timer that fires by itself"),
    OUT_STDIN: ("outside: stdin", "input someone types or pipes in"),
    OUT_PEER: ("outside: unknown peer", "a socket peer or fifo end not in the capture"),
}
_DEAD_STATES = ("stopped", "zombie", "exited")
_WORK_STATES = ("computing", "working")
_TRACKERS = ("resource_tracker", "forkserver", "semaphore_tracker")
_THREAD_STATES = {"R": "running", "S": "waiting", "D": "disk", "T": "stopped", "t": "stopped"}
FUTEX_PRIVATE = 0x80
# A read that blocks on a pipe or fifo, by wchan: 6.x kernels say anon_pipe_read, which the
# wait table (``waits``) does not know, so the wait reaches here as "blocked".
_PIPE_READS = ("pipe_read", "anon_pipe_read", "pipe_wait")
# The label of a process outside the job holding the other end of a wait (``FdHolder``).
OUTSIDE_JOB = "(outside the job)"
_HOLDER_STATES: Dict[str, NodeState] = {
    "T": "stopped",
    "t": "stopped",
    "Z": "zombie",
    "X": "zombie",
    "D": "disk",
    "R": "computing",
    "S": "sleeping",
}
_WRITES = ("write", "sendto", "sendmsg")


def node_key(p: ProcSignals) -> str:
    return f"{p.key[0]}/{p.pid}"


def is_outside(key: str) -> bool:
    return key.startswith(OUTSIDE)


def label_of(p: ProcSignals) -> str:
    """ "rank 3", "pid 12 cc1plus", "pid 12 cc1plus on node2"."""
    if p.rank is not None and not is_rank_helper(p):
        return f"rank {p.rank}"
    name = p.info.name
    title = p.info.cmdline[0] if len(p.info.cmdline) == 1 else ""
    if name and title.startswith(name) and len(title) <= 40:
        name = title  # a process title (setproctitle) the 15-byte comm cut: VLLM::EngineCore
    text = f"pid {p.pid}" + (f" {name}" if name else "")
    return text + (f" on {p.key[0]}" if p.key[0] else "")


READ_WORK_BYTES = 1 << 20  # reads over the capture that make a waiting process a worker


def _reading(p: ProcSignals) -> bool:
    """A loader reading its files (rchar or the file offsets rise): its waits are its I/O -
    work the others' waits lead to, not a dead end."""
    return max(p.read_delta_bytes, p.file_progress_bytes) >= READ_WORK_BYTES


def _computing(p: ProcSignals) -> bool:
    if _reading(p):
        return True
    if p.intervals == 0:
        return p.main_wait is not None and p.main_wait.kind is None
    half = max(1, (p.intervals + 1) // 2)
    if p.compute_pct >= COMPUTE_PCT and p.compute_intervals >= half:
        return True
    return p.main_wait is not None and p.main_wait.kind is None and p.compute_pct >= COMPUTE_PCT


def node_state(p: ProcSignals, working: bool = False) -> NodeState:
    """The process's state in the graph (a closed set; see ``model.NodeState``). ``working``:
    the verdict measured its output moving (bytes written, requests answered, its log, its
    memory) - work the others' waits may lead to, whatever its main thread waits in now -
    unless it holds requests its clients wait on unanswered."""
    if p.dead:
        return "zombie" if p.statuses and p.statuses[-1] == "zombie" else "exited"
    if p.stopped:
        return "stopped"
    state = _live_state(p)
    # A server whose clients wait unanswered is not working on their requests, whatever its
    # log says (vLLM's stats line reports the last window's tokens/s while its engine is
    # stopped): the chain goes on through it to whom it handed them.
    if working and state in ("blocked", "sleeping", "serving") and not p.stale_requests:
        return "working"
    return state


def _live_state(p: ProcSignals) -> NodeState:
    w = p.main_wait
    if w is not None and w.kind == "disk":
        return "disk"
    if p.main_family == PEER and p.spin_pct >= max(SPIN_PCT, p.compute_pct):
        return "spinning"  # a busy-wait collective (gloo, shm all-reduce) burns, not works
    if _computing(p):
        return "computing"
    if w is None:
        return "blocked"
    if p.spin_pct >= SPIN_PCT and w.kind is not None:
        return "spinning"
    if w.kind is None:
        return "computing"
    fam = p.main_family
    if fam == SERVE and (serving_ports([p]) or w.kind == "accept"):
        return "serving"
    if fam == SLEEP or (fam == SERVE and (w.timed is True or p.main_wakeups > 0)):
        return "sleeping"
    return "blocked"


def _threads_text(ps: Optional[ProcessSample]) -> str:
    if ps is None or not ps.threads:
        return ""
    counts: Dict[str, int] = {}
    for t in ps.threads:
        name = _THREAD_STATES.get(t.state, "other")
        counts[name] = counts.get(name, 0) + 1
    n = len(ps.threads)
    if n == 1:
        return "1 thread"
    parts = ", ".join(f"{c} {s}" for s, c in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{n} threads: {parts}"


def _detail(p: ProcSignals, state: NodeState, last: Optional[ProcessSample]) -> str:
    bits: List[str] = []
    if p.dead:
        code = f", exit code {p.exit_code}" if p.exit_code is not None else ""
        bits.append(f"{p.statuses[-1] if p.statuses else 'dead'}{code}")
    elif state == "working":
        bits.append(f"its output moves; main thread in {where(p)}")
    elif state == "computing" and _reading(p) and p.compute_pct < COMPUTE_PCT:
        read = size(max(p.read_delta_bytes, p.file_progress_bytes))
        bits.append(f"reading: {read} read during the capture, main thread in {where(p)}")
    elif state == "computing":
        hot = p.hot_label or (p.main_wait.label if p.main_wait else "?")
        bits.append(f"computing in `{hot}` ({p.compute_pct:.0f}% of a core)")
    else:
        bits.append(f"main thread in {where(p)}")
        if state == "spinning":
            bits.append(f"spins {p.spin_pct:.0f}% of a core in the wait")
    threads = _threads_text(last)
    if threads:
        bits.append(threads)
    if p.lock_waiters:
        addrs = len({a for _, a, _ in p.lock_waiters})
        bits.append(f"{len(p.lock_waiters)} thread(s) blocked on {addrs} lock(s) in every sample")
    ports = serving_ports([p])
    if ports:
        bits.append("listens on " + ", ".join(f":{port}" for port in ports[:4]))
    if p.stale_requests:
        bits.append(f"{p.stale_requests} request(s) unanswered {p.stale_age_s:.0f}+ s")
    return "; ".join(bits)


@dataclass
class _Builder:
    bundle: Bundle
    procs: Sequence[ProcSignals]
    last: Dict[Tuple[str, int], ProcessSample]
    nodes: Dict[str, WaitNode] = field(default_factory=dict)
    edges: List[WaitEdge] = field(default_factory=list)
    by_key: Dict[str, ProcSignals] = field(default_factory=dict)
    children: Dict[Tuple[str, int], List[ProcSignals]] = field(default_factory=dict)
    # Who holds which end (``FdEnd``), built on first use: (host, inode) -> holders, and each
    # TCP socket's local address -> holders (any host of a merged bundle).
    _by_inode: Optional[Dict[Tuple[str, int], List[Tuple[ProcSignals, FdEnd]]]] = None
    _by_local: Optional[Dict[str, List[Tuple[ProcSignals, FdEnd]]]] = None

    def ends_index(
        self,
    ) -> Tuple[
        Dict[Tuple[str, int], List[Tuple[ProcSignals, FdEnd]]],
        Dict[str, List[Tuple[ProcSignals, FdEnd]]],
    ]:
        if self._by_inode is None or self._by_local is None:
            self._by_inode, self._by_local = {}, {}
            for q in self.procs:
                ps = self.last.get(q.key)
                for e in ps.fd_ends if ps is not None else ():
                    self._by_inode.setdefault((q.key[0], e.inode), []).append((q, e))
                    if e.kind == "tcp" and e.local:
                        self._by_local.setdefault(e.local, []).append((q, e))
        return self._by_inode, self._by_local

    def outside_holders(self, host: str, inode: int) -> List[FdHolder]:
        """The latest sample's holders outside the job of ``inode`` (on ``host``)."""
        for sample in reversed(self.bundle.samples):
            if not sample.fd_holders:
                continue
            if not any(ps.host == host for ps in sample.processes):
                continue
            found = [h for h in sample.fd_holders if h.inode == inode]
            if found:
                return found
        return []

    def holder_nodes(self, host: str, inode: int, what: str) -> List[Tuple[str, FdHolder]]:
        """The nodes (at most ``MAX_FANOUT``) of the processes outside the job holding
        ``inode``, with their records."""
        found = self.outside_holders(host, inode)[:MAX_FANOUT]
        return [(self.holder_node(host, h, what), h) for h in found]

    def holder_node(self, host: str, h: FdHolder, what: str) -> str:
        return self.outside_node(host, h.pid, h.name, h.state, what)

    def outside_node(self, host: str, pid: int, name: str, state: str, what: str) -> str:
        """The node of a process outside the job that holds what a wait needs (a pipe's end,
        a file lock), in the state /proc gave it."""
        key = f"{host}/{pid}"
        if key not in self.nodes:
            named = f" {name}" if name else ""
            self.nodes[key] = WaitNode(
                key=key,
                pid=pid,
                host=host,
                label=f"pid {pid}{named} {OUTSIDE_JOB}",
                state=_HOLDER_STATES.get(state, "blocked"),
                detail=f"holds {what}; state {state}",
            )
        return key

    def add_outside(self, key: str) -> None:
        if key not in self.nodes:
            label, detail = _OUTSIDE_NODES[key]
            self.nodes[key] = WaitNode(key=key, label=label, state="serving", detail=detail)

    def edge(self, src: ProcSignals, dst: str, kind: EdgeKind, evidence: str) -> None:
        if is_outside(dst):
            self.add_outside(dst)
        self.edges.append(WaitEdge(src=node_key(src), dst=dst, kind=kind, evidence=evidence))

    def rank_order(self, targets: Iterable[ProcSignals]) -> List[ProcSignals]:
        """Likeliest enders first: stopped or dead, then computing, then the rest."""

        def score(q: ProcSignals) -> Tuple[int, int, int]:
            state = self.nodes[node_key(q)].state
            first = 0 if state in _DEAD_STATES else 1 if state in _WORK_STATES else 2
            return first, q.rank if q.rank is not None else 1 << 30, q.pid

        return sorted(targets, key=score)[:MAX_FANOUT]


def _last_alive(bundle: Bundle, want: Set[Tuple[str, int]]) -> Dict[Tuple[str, int], ProcessSample]:
    out: Dict[Tuple[str, int], ProcessSample] = {}
    for sample in reversed(bundle.samples):
        for ps in sample.processes:
            key = (ps.host, ps.pid)
            if key in want and key not in out and ps.status == "alive":
                out[key] = ps
        if len(out) == len(want):
            break
    return out


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
        at = group.index(p)
        ring = [group[(at + k) % len(group)] for k in range(1, min(len(group), MAX_FANOUT + 1))]
        for q in ring:
            b.edge(p, node_key(q), "peer", f"waits in {where(p)} like every rank it waits for")


def _family_of(b: _Builder, p: ProcSignals, trackers: bool = False) -> List[ProcSignals]:
    kids = b.children.get((p.key[0], p.pid), [])
    if not trackers:
        kids = [k for k in kids if not any(m in " ".join(k.info.cmdline) for m in _TRACKERS)]
    return kids


def _parent_of(b: _Builder, p: ProcSignals) -> Optional[ProcSignals]:
    if p.info.ppid is None:
        return None
    return b.by_key.get(f"{p.key[0]}/{p.info.ppid}")


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
        if f.filename.endswith("/queue.py") or "concurrent/futures" in f.filename:
            return not b.children.get((p.key[0], p.pid)) or f.filename.endswith("/queue.py")
    return False


def _main_thread(b: _Builder, p: ProcSignals) -> Optional[ThreadSample]:
    ps = b.last.get(p.key)
    if ps is None:
        return None
    return next((t for t in ps.threads if t.tid == ps.pid), None)


def _main_futex_op(b: _Builder, p: ProcSignals) -> Optional[int]:
    main = _main_thread(b, p)
    return main.futex_op if main is not None else None


def _request_servers(b: _Builder, p: ProcSignals) -> List[Tuple[ProcSignals, int]]:
    """The job's processes that hold an unanswered request from a process of the job on a
    TCP port (their ``served`` connections: data in, no answer out) - what a client blocked
    in a socket read waits for. Which client sent it is not in the capture (the client's
    sockets are not recorded), so every such server is a candidate; a unix-socket read is
    none of theirs."""
    main = _main_thread(b, p)
    if main is not None and (main.wchan or "").startswith("unix_"):
        return []
    port_of: Dict[str, int] = {}
    for q in b.procs:
        ps = b.last.get(q.key)
        if q is p or q.dead or ps is None or q.key[0] != p.key[0]:
            continue
        ports = sorted({c.port for c in ps.served if c.internal and c.pending})
        if ports:
            port_of[node_key(q)] = ports[0]
    servers = [q for q in b.procs if node_key(q) in port_of]
    return [(q, port_of[node_key(q)]) for q in b.rank_order(servers)]


def _link_text(e: FdEnd) -> str:
    if e.kind == "pipe":
        return f"pipe:[{e.inode}]"
    if e.kind == "fifo":
        return f"fifo {e.path}" if e.path else f"fifo:[{e.inode}]"
    if e.kind == "unix":
        return f"unix socket:[{e.inode}]" + (f" {e.path}" if e.path else "")
    return f"{e.kind} {e.local} → {e.remote}"


def _fd_wait(b: _Builder, p: ProcSignals) -> Optional[Tuple[ThreadSample, FdEnd]]:
    """The main thread's blocked syscall fd, when the capture recorded what it is."""
    main = _main_thread(b, p)
    ps = b.last.get(p.key)
    if main is None or ps is None or main.syscall_fd is None or not ps.fd_ends:
        return None
    end = next((e for e in ps.fd_ends if e.fd == main.syscall_fd), None)
    return (main, end) if end is not None else None


def _no_fd_data(b: _Builder, q: ProcSignals) -> bool:
    ps = b.last.get(q.key)
    return q.dead or ps is None or not ps.fd_ends


def _pipe_edges(b: _Builder, p: ProcSignals, main: ThreadSample, end: FdEnd) -> None:
    """A pipe or fifo: the processes holding the same inode in the other mode end the wait."""
    mode = end.mode
    if mode == "?":
        mode = "w" if main.syscall in _WRITES else "r"
    verb, other = ("writes", "read") if mode == "w" else ("reads", "write")
    wanted = {"r": ("w", "rw", "?"), "w": ("r", "rw", "?")}.get(mode, ("r", "w", "rw", "?"))
    by_inode, _ = b.ends_index()
    holders = [
        (q, e)
        for q, e in by_inode.get((p.key[0], end.inode), [])
        if e.kind == end.kind and e.mode in wanted and not (q is p and e.fd == end.fd)
    ]
    what = f"{verb} fd {end.fd} ({_link_text(end)})"
    others = b.rank_order({node_key(q): q for q, _ in holders if q is not p}.values())
    for q in others:
        fds = ", ".join(str(e.fd) for r, e in holders if r is q)
        b.edge(p, node_key(q), "pipe", f"{what}; {label_of(q)} holds its {other} end (fd {fds})")
    if others:
        return
    mine = [e for q, e in holders if q is p]
    if mine:
        # It holds the other end itself: only a process that held it too and is gone (a
        # zombie child), or one whose fds were not read, could have ended it.
        family = [*_family_of(b, p), *([_parent_of(b, p)] if _parent_of(b, p) else [])]
        for q in b.rank_order(q for q in family if q is not None and _no_fd_data(b, q)):
            b.edge(
                p,
                node_key(q),
                "pipe",
                f"{what}; it holds the {other} end itself (fd {mine[0].fd}); {label_of(q)} "
                "may have held it too (its fds are not in the capture)",
            )
        b.edge(
            p,
            node_key(p),
            "pipe",
            f"{what}; it holds the {other} end itself (fd {mine[0].fd}): no other process does",
        )
        return
    outside = [h for h in b.outside_holders(p.key[0], end.inode) if h.mode in wanted]
    for h in outside[:MAX_FANOUT]:
        dst = b.holder_node(p.key[0], h, f"the {other} end of {_link_text(end)}")
        b.edge(p, dst, "pipe", f"{what}; pid {h.pid} {h.name} {OUTSIDE_JOB} holds its {other} end")
    if not outside:
        b.edge(p, OUT_PEER, "outside", f"{what}; no process found holding its {other} end")


def _unix_edges(b: _Builder, p: ProcSignals, end: FdEnd) -> bool:
    if not end.peer_inode:
        return False
    by_inode, _ = b.ends_index()
    what = f"waits on fd {end.fd} ({_link_text(end)})"
    holders = [q for q, e in by_inode.get((p.key[0], end.peer_inode), []) if e.kind == "unix"]
    others = [q for q in holders if q is not p]
    # It holding its own peer too (a multiprocessing Pipe's end kept after the fork) ends
    # nothing while another process holds it: only when none does.
    for q in b.rank_order({node_key(q): q for q in others or holders}.values()):
        whose = "it holds its peer itself" if q is p else f"{label_of(q)} holds its peer"
        b.edge(p, node_key(q), "unix", f"{what}; {whose} socket:[{end.peer_inode}]")
    if holders:
        return True
    outside = b.holder_nodes(p.key[0], end.peer_inode, f"the peer of {_link_text(end)}")
    for dst, h in outside:
        b.edge(p, dst, "unix", f"{what}; pid {h.pid} {h.name} {OUTSIDE_JOB} holds its peer")
    if not outside:
        b.edge(p, OUT_PEER, "outside", f"{what}; no process found holding its peer")
    return True


def _tcp_edges(b: _Builder, p: ProcSignals, end: FdEnd) -> bool:
    """A TCP connection: the process holding the reverse 4-tuple (on this host, or on another
    host of a merged bundle), else the network outside the job."""
    if not end.remote or not end.local:
        return False  # a listener: accept() waits for clients (the old rules)
    _, by_local = b.ends_index()
    found = [(q, e) for q, e in by_local.get(end.remote, []) if q is not p]
    exact = [(q, e) for q, e in found if e.remote == end.local]
    what = f"waits on fd {end.fd} (tcp {end.local} → {end.remote})"
    targets = exact or [(q, e) for q, e in found if q.key[0] != p.key[0]]
    servers = {node_key(q): port for q, port in _request_servers(b, p)}
    seen: Set[str] = set()
    for q, _ in targets:
        key = node_key(q)
        if key in seen or len(seen) >= MAX_FANOUT:
            continue
        seen.add(key)
        if key in servers:
            b.edge(
                p,
                key,
                "request",
                f"{what}; {label_of(q)} holds the other end with an unanswered request from "
                f"the job on :{servers[key]}",
            )
        else:
            b.edge(p, key, "tcp", f"{what}; {label_of(q)} holds the other end")
    if not seen and end.peer_inode:
        # The other end is a socket of this host no 4-tuple of the capture matched: a server
        # of the job whose listener still queues the connection, or a process outside it.
        by_inode, _ = b.ends_index()
        for q, _ in by_inode.get((p.key[0], end.peer_inode), []):
            if q is not p and node_key(q) not in seen and len(seen) < MAX_FANOUT:
                seen.add(node_key(q))
                b.edge(p, node_key(q), "tcp", f"{what}; {label_of(q)} holds the other end")
        holders = by_inode.get((p.key[0], end.peer_inode), [])
        if not seen and any(q is p for q, _ in holders) and not _accepts_elsewhere(b, p):
            # Its own listener queues the connection, and no other thread of it accepts: the
            # one that would answer is the one waiting (a sync call from an event loop to
            # its own server).
            seen.add(node_key(p))
            b.edge(p, node_key(p), "tcp", f"{what}: its own listener holds the other end, "
                   "and no other thread of it accepts or runs an event loop")  # fmt: skip
        other = f"the other end of tcp {end.local} → {end.remote}"
        for dst, h in b.holder_nodes(p.key[0], end.peer_inode, other):
            if dst not in seen:
                seen.add(dst)
                b.edge(
                    p, dst, "tcp", f"{what}; pid {h.pid} {h.name} {OUTSIDE_JOB} holds the other end"
                )
    if not seen:
        _, _, local_port = end.local.rpartition(":")
        if local_port.isdigit() and int(local_port) in serving_ports([p]):
            # Its own port's client, outside the job: a request or its next bytes come in.
            b.edge(p, OUT_NETWORK, "outside", f"{what}: a client outside the capture")
        else:
            # A client of a server the capture does not hold: only that server's answer
            # (or a timeout) ends the read.
            b.edge(p, OUT_PEER, "outside", f"{what}: no process of the capture holds {end.remote}")
        if p.main_wait is not None and p.main_wait.timed is True:
            b.edge(p, OUT_TIMER, "outside", f"{what}, with a timeout")
    return True


def _accepts_elsewhere(b: _Builder, p: ProcSignals) -> bool:
    """Has ``p`` a thread besides the main one that could take a new connection - one in
    accept, or running an event loop?"""
    ps = b.last.get(p.key)
    if ps is None:
        return True  # nothing to tell: assume it could
    return any(
        thread_wait(b.bundle, t).kind in ("accept", "event-loop")
        for t in ps.threads
        if t.tid != ps.pid
    )


def _fd_edges(b: _Builder, p: ProcSignals) -> bool:
    """The edges of a main thread blocked on a recorded fd end, matched by inode (pipes,
    fifos, unix sockets) or 4-tuple (TCP); False when there is none to match (older bundles,
    an fd the capture did not record): the old guesses then apply."""
    found = _fd_wait(b, p)
    return found is not None and _end_edges(b, p, *found)


def _end_edges(b: _Builder, p: ProcSignals, thread: ThreadSample, end: FdEnd) -> bool:
    if end.kind in ("pipe", "fifo"):
        _pipe_edges(b, p, thread, end)
        return True
    if end.kind == "unix":
        return _unix_edges(b, p, end)
    if end.kind == "tcp":
        return _tcp_edges(b, p, end)
    return False


def _thread_fd_edges(b: _Builder, p: ProcSignals) -> bool:
    """Threads of ``p`` besides the main one, blocked on a recorded fd end whose other side a
    process holds (of the job, or outside it): the main thread's wait on its own future,
    queue or lock is ended through them - a pool worker reading a socket to a server, a reader
    thread on a child's pipe, a server's handler calling its backend. Only edges to processes
    are kept (an end nobody was found holding leaves the feeder-thread guess to decide)."""
    ps = b.last.get(p.key)
    if ps is None or not ps.fd_ends:
        return False
    ends = {e.fd: e for e in ps.fd_ends}
    me = node_key(p)
    drew = 0
    for t in ps.threads:
        end = ends.get(t.syscall_fd) if t.syscall_fd is not None else None
        if t.tid == ps.pid or end is None or t.state not in ("S", "D"):
            continue
        if end.kind == "tcp" and not end.remote:
            continue  # a listener: clients, the outside
        first, known = len(b.edges), set(b.nodes)
        _end_edges(b, p, t, end)
        kept = [e for e in b.edges[first:] if not is_outside(e.dst) and e.dst != me]
        del b.edges[first:]
        name = t.py_thread_name or t.name or str(t.tid)
        for e in kept[: MAX_FANOUT - drew]:
            b.edges.append(msgspec.structs.replace(e, evidence=f"its thread {name} {e.evidence}"))
        drew += len(kept)
        used = {e.dst for e in b.edges}
        for k in set(b.nodes) - known - used:
            del b.nodes[k]  # an outside node only a dropped edge pointed at
        if drew >= MAX_FANOUT:
            break
    return drew > 0


def _file_lock_edges(b: _Builder, p: ProcSignals) -> None:
    """A file lock (flock, fcntl): whoever /proc/locks says holds it ends the wait - a process
    of the job, or one outside it (a node of its own, in its state)."""
    found = lock_waits(b.bundle, [p])
    if not found:
        return
    w = found[0]
    what = f"the file lock on {w.path or 'its lock file'}"
    here = where(p)
    for h in w.holders[:MAX_FANOUT]:
        if h.proc is not None:
            dst = node_key(h.proc)
        elif h.pid > 0:
            dst = b.outside_node(p.key[0], h.pid, h.name, h.state, what)
        else:
            continue
        b.edge(p, dst, "file-lock", f"waits in {here} to take {what}; {holder_label(h)} holds it")
    if all(h.pid <= 0 and h.proc is None for h in w.holders):  # none, or none known
        b.edge(p, OUT_PEER, "outside", f"waits in {here} to take {what}; its holder is unknown")


def _stdin_from_job(b: _Builder, p: ProcSignals) -> bool:
    """Its stdin is a pipe (or socket) whose other end another process of the job holds -
    ``Popen(stdin=PIPE)`` then ``wait()``: that process, not a person, must write (or close)
    it, so the read waits on it like any pipe, not on the outside. Unless a holder has a
    thread of its own on a door (a launcher forwarding its terminal to the child's stdin):
    input can still come through it."""
    found = _fd_wait(b, p)
    if found is None or found[1].kind not in ("pipe", "fifo", "unix"):
        return False
    end = found[1]
    inode = end.peer_inode if end.kind == "unix" else end.inode
    by_inode, _ = b.ends_index()
    holders = {
        node_key(q): q
        for q, e in by_inode.get((p.key[0], inode or 0), [])
        if q is not p and (end.kind == "unix" or e.mode in ("w", "rw", "?"))
    }
    return bool(holders) and all(_feeder_door(b, q) is None for q in holders.values())


_FEEDER_KINDS = ("event-loop", "accept", "socket-read", "stdin", "sleep")


def _lock_cycle(p: ProcSignals) -> bool:
    """Threads blocked on two or more locks in every sample: they hold what the others want
    (a lock-order cycle) - no other thread of theirs can end that."""
    return len({a for _, a, _ in p.lock_waiters}) >= 2


def _feeder_door(b: _Builder, p: ProcSignals) -> Optional[Tuple[str, str]]:
    """A thread of ``p`` (not the main one) that waits on the outside - a socket, a port, a
    timer - and so can fill the queue the main thread waits on: vLLM's EngineCore waits on its
    input queue, which its input thread fills from the front end's socket. (outside node, why)"""
    ps = b.last.get(p.key)
    if ps is None:
        return None
    ports = serving_ports([p])
    for t in ps.threads:
        if t.tid == ps.pid or t.stack_id is None:
            continue
        tw = thread_wait(b.bundle, t)
        if tw.kind not in _FEEDER_KINDS and tw.timed is not True:
            continue
        name = t.py_thread_name or t.name or str(t.tid)
        why = f"its thread {name} waits in `{tw.label}` and can fill it"
        if tw.kind == "sleep" or (tw.timed is True and tw.kind not in _FEEDER_KINDS):
            return OUT_TIMER, f"{why} (a timer wakes it)"
        if ports or tw.kind == "accept":
            return OUT_NETWORK, f"{why} (requests on :{ports[0] if ports else '?'})"
        return OUT_PEER, f"{why} (from a socket peer)"
    return None


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


def _own_edges(b: _Builder, p: ProcSignals) -> None:
    """The edges of one process's main-thread wait (and its other threads' lock waits)."""
    w = p.main_wait
    if p.dead or p.stopped or w is None or w.kind is None:
        return
    first_edge = len(b.edges)
    kind, fam, here = w.kind, p.main_family, where(p)
    main = _main_thread(b, p)
    if kind == "blocked" and main is not None and (main.wchan or "").startswith(_PIPE_READS):
        kind = "queue"  # a native read of a pipe: whoever holds the write end ends it
    me = node_key(p)
    parent = _parent_of(b, p)
    own_ports = serving_ports([p])
    if fam == PEER:
        return  # _peer_edges
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
    elif fam == RESULT or kind in ("queue", "write-full"):
        edge_kind: EdgeKind = "result" if fam == RESULT else "queue"
        if kind == "write-full" or (w.native and kind == "queue"):
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
            b.edge(p, me, edge_kind, f"{what} {here}; only its own threads can answer it")
            feeder = None if _thread_fd_edges(b, p) else _feeder_door(b, p)
            if feeder is not None:
                b.edge(p, feeder[0], "outside", feeder[1])
    elif fam == LOCK or kind == "blocked":
        op = _main_futex_op(b, p)
        if op is not None and not op & FUTEX_PRIVATE and kind == "lock":
            shared = [*([parent] if parent else []), *_family_of(b, p)]
            for k in b.rank_order(shared):
                b.edge(p, node_key(k), "lock", f"waits on a shared futex in {here}")
        elif kind != "blocked" or p.lock_waiters:
            cycle = _lock_cycle(p)
            feeder = None if cycle else _feeder_door(b, p)
            if not cycle and _thread_fd_edges(b, p):
                pass  # another thread of its own waits on a process that can end its wait
            elif feeder is not None:  # another thread of its own runs again and can end it
                why = feeder[1].replace("fill it", "release or set it")
                b.edge(p, feeder[0], "outside", f"waits on a lock or event in {here}; {why}")
            else:
                b.edge(p, me, "lock", f"waits on a lock in {here}: only its own threads hold it")
    elif kind == "fifo-open":
        b.edge(p, OUT_PEER, "outside", "opens a named pipe: waits for a process to open its end")
    elif fam == SLEEP:
        b.edge(p, OUT_TIMER, "outside", f"sleeps in {here}: a timer ends it")
    elif kind in ("event-loop", "accept", "socket-read"):
        servers = _request_servers(b, p) if kind == "socket-read" else []
        for q, port in servers:
            b.edge(
                p,
                node_key(q),
                "request",
                f"reads a socket in {here}; {label_of(q)} holds an unanswered request "
                f"from the job on :{port}",
            )
        if servers:
            pass  # a server of the job holds its request: the chain goes on there
        elif own_ports:
            ports = ", ".join(f":{port}" for port in own_ports[:3])
            b.edge(p, OUT_NETWORK, "outside", f"waits in {here} and listens on {ports}")
        elif w.timed is not False or p.main_wakeups > 0:
            b.edge(p, OUT_TIMER, "outside", f"waits in {here} with a timeout (or woke)")
        else:
            b.edge(p, OUT_PEER, "outside", f"waits in {here}: no timeout, no port - a peer")
    if kind == "stdin" and len(b.edges) == first_edge:
        b.edge(p, OUT_STDIN, "outside", f"reads stdin (fd 0) in {here}")
    mine = b.edges[first_edge:]
    # Threads blocked on one lock (no cycle) while the main thread waits on a door - a timer,
    # a port, a timeout - or on another of its threads: the main thread runs again and may
    # release it. Two or more locks held against each other: only a lock-order cycle.
    door = any(is_outside(e.dst) for e in mine) or w.timed is True
    if p.lock_waiters and not any(e.dst == me for e in mine) and (_lock_cycle(p) or not door):
        n = len(p.lock_waiters)
        addrs = len({a for _, a, _ in p.lock_waiters})
        b.edge(p, me, "lock", f"{n} thread(s) blocked on {addrs} lock(s) in every sample")
    if len(b.edges) == first_edge and w.timed is True:
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
    bundle: Bundle, procs: Sequence[ProcSignals], working: Collection[Tuple[str, int]] = ()
) -> _Builder:
    b = _Builder(bundle=bundle, procs=procs, last=_last_alive(bundle, {p.key for p in procs}))
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
            rank=p.rank,
            label=label_of(p),
            state=state,
            detail=_detail(p, state, b.last.get(p.key)),
        )
    ranks = [p for p in procs if p.rank is not None and not is_rank_helper(p)]
    peers = [p for p in procs if p.main_family == PEER and p.rank is None and not p.dead]
    _peer_edges(b, ranks + peers)
    for p in procs:
        _own_edges(b, p)
    return b


# Chains ----------------------------------------------------------------------------------


@dataclass
class Chain:
    """One start followed to its end: ``steps`` are (edge kind, node key) after the start."""

    start: str
    steps: List[Tuple[str, str]]
    end: str
    reason: str  # stopped | dead | computing | disk | outside | lock | self | cycle | stuck
    cycle: Tuple[str, ...] = ()


def _sccs(keys: Sequence[str], succ: Dict[str, List[str]]) -> Dict[str, int]:
    """Strongly connected components (iterative Tarjan): node -> component id."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    comp: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    counter = 0
    for root in keys:
        if root in index:
            continue
        work: List[Tuple[str, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            nxt = succ.get(v, [])
            if i < len(nxt):
                work.append((v, i + 1))
                w = nxt[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = index[v]
                    if w == v:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp


def _terminal(node: WaitNode) -> Optional[str]:
    if node.state == "stopped":
        return "stopped"
    if node.state in ("zombie", "exited"):
        return "dead"
    if node.state in ("computing", "working", "disk"):
        return node.state
    return None


def follow(
    start: str,
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    comp: Dict[str, int],
    members: Dict[int, List[str]],
) -> Chain:
    """Follow the likeliest ender from ``start`` until no way forward is left."""
    steps: List[Tuple[str, str]] = []
    seen = {start}
    cur = start
    for _ in range(MAX_DEPTH):
        reason = _terminal(nodes[cur]) if (steps or not is_outside(cur)) else None
        if reason:
            return Chain(start, steps, cur, reason)
        edges = out.get(cur, [])
        if steps and not edges and nodes[cur].label.endswith(OUTSIDE_JOB):
            return Chain(start, steps, cur, "outside")  # a holder outside the job
        inner = [e for e in edges if e.dst != cur and not is_outside(e.dst)]
        if not inner:
            selfs = [e for e in edges if e.dst == cur]
            fed = any(is_outside(e.dst) for e in edges)
            if selfs and not (fed and selfs[0].kind != "lock"):
                return Chain(start, steps, cur, "lock" if selfs[0].kind == "lock" else "self")
            if any(is_outside(e.dst) for e in edges):
                return Chain(start, steps, cur, "outside")
            return Chain(start, steps, cur, "stuck")

        def score(e: WaitEdge, here: str = cur) -> int:
            t = nodes[e.dst]
            if t.state in ("zombie", "exited") and e.kind == "child":
                return 5  # an exited child ends its parent's waitpid: a live one is the wait
            if t.state in _DEAD_STATES:
                return 0
            if t.state in (*_WORK_STATES, "disk"):
                return 1
            if comp.get(e.dst) != comp.get(here):
                return 2
            return 3 if e.dst not in seen else 4

        best = min(inner, key=score)
        if best.dst in seen:
            cycle = tuple(members.get(comp.get(cur, -1), [cur]))
            return Chain(start, steps, cur, "cycle", cycle)
        steps.append((best.kind, best.dst))
        seen.add(best.dst)
        cur = best.dst
    return Chain(start, steps, cur, "stuck")


def _who(nodes: Sequence[WaitNode]) -> str:
    ranks = [n.rank for n in nodes if n.rank is not None and n.label.startswith("rank ")]
    others = [n.label for n in nodes if not (n.rank is not None and n.label.startswith("rank "))]
    parts = [rank_set(ranks)] if ranks else []
    if others:
        parts.append(", ".join(others[:4]) + (f" (+{len(others) - 4})" if len(others) > 4 else ""))
    return ", ".join(parts)


def _main_text(p: Optional[ProcSignals], node: WaitNode, short: bool = False) -> str:
    """What the end node does, in words: "sleeping in `x` ← `y`", "computing in `f`"."""
    if p is None:
        return f"{node.state}, {node.detail}" if node.detail else node.state
    if p.dead:
        code = f", exit code {p.exit_code}" if p.exit_code is not None else ""
        return f"{node.state}{code}"
    if node.state == "working":
        return f"working (its output moves) in {where(p)}"
    if node.state == "computing" and _reading(p) and p.compute_pct < COMPUTE_PCT:
        read = size(max(p.read_delta_bytes, p.file_progress_bytes))
        return f"reading in {where(p)}" + ("" if short else f" ({read} during the capture)")
    if node.state == "computing":
        hot = p.hot_label or (p.main_wait.label if p.main_wait else "?")
        pct = "" if short else f" ({p.compute_pct:.0f}% of a core)"
        return f"computing in `{hot}`{pct}"
    return f"{node.state} in {where(p)}"


def _end_text(
    chain: Chain,
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    procs: Dict[str, ProcSignals],
    short: bool = False,
) -> str:
    n = nodes[chain.end]
    p = procs.get(chain.end)
    main = _main_text(p, n, short)
    if chain.reason == "stopped":
        text = f"stopped (SIGSTOP or a debugger) - `kill -CONT {n.pid}`"
    elif chain.reason == "dead" and chain.steps and chain.steps[-1][0] == "child":
        text = f"{main} - the parent's waitpid returns with it (it reaps the child, runs on)"
    elif chain.reason == "dead":
        text = f"{main} - it will never answer"
    elif chain.reason in ("computing", "working"):
        text = main
    elif chain.reason == "disk":
        text = f"{main} (state D: storage or NFS not answering)"
    elif chain.reason == "cycle":
        kinds = sorted(
            {e.kind for k in chain.cycle for e in out.get(k, []) if e.dst in chain.cycle}
        )
        text = f"a cycle - they wait on each other ({', '.join(kinds)}), nothing else ends it"
        if not short:  # each one's wait, in the words of its evidence
            firsts = (
                (k, next((e for e in out.get(k, []) if e.dst in chain.cycle and e.dst != k), None))
                for k in chain.cycle
            )
            hops = [f"{nodes[k].label} {e.evidence}" for k, e in firsts if e is not None]
            if hops:
                text += ": " + "; ".join(hops)[:300]
            text += " - kill it, nothing will end these waits"
    elif chain.reason == "outside" and p is None and n.label.endswith(OUTSIDE_JOB):
        text = f"{n.state}, outside the job ({n.detail}) - what it waits on is not captured"
    elif chain.reason == "outside":
        doors = sorted({nodes[e.dst].label for e in out.get(chain.end, []) if is_outside(e.dst)})
        text = f"{main} - waits on the {' / '.join(doors) or 'outside'}"
    elif chain.reason == "lock":
        locks = ""
        if p is not None and p.lock_waiters:
            addrs = len({a for _, a, _ in p.lock_waiters})
            locks = f"; {len(p.lock_waiters)} thread(s) blocked on {addrs} lock(s)"
            locks += " (a lock cycle)" if addrs >= 2 else ""
        text = f"{main}{locks} - only its own threads can release the lock"
    elif chain.reason == "self":
        text = f"{main} - only its own threads can answer it"
    else:
        text = f"{main} - nothing in the capture can end it"
    if p is not None and p.stale_requests:
        text += f"; {p.stale_requests} request(s) unanswered {p.stale_age_s:.0f}+ s"
    return text


def chain_lines(
    chains: Sequence[Chain],
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    procs: Dict[str, ProcSignals],
) -> Tuple[List[str], List[str], List[Tuple[str, ...]], List[str]]:
    """One line per way of ending (starts that end the same way are merged), how each line
    ends (``model.ChainEnd``), the node keys each line ends at, and all the ends."""
    groups: Dict[Tuple[object, ...], List[Chain]] = {}
    end_keys = {c.end for c in chains if c.steps}
    for c in chains:
        if not c.steps and c.start in end_keys:
            continue  # already the end of someone else's chain
        if c.reason == "cycle":
            cyc = set(c.cycle)
            lead = tuple(s for s in c.steps if s[1] not in cyc)
            key: Tuple[object, ...] = ("cycle", tuple(sorted(cyc)), lead, c.start in cyc)
        elif c.steps:
            key = (c.reason, c.end, tuple(c.steps))
        else:
            key = (c.reason, _end_text(c, nodes, out, procs, short=True))
        groups.setdefault(key, []).append(c)
    lines: List[str] = []
    reasons: List[str] = []
    line_ends: List[Tuple[str, ...]] = []
    ends: List[str] = []
    for members in groups.values():
        first = members[0]
        starts = _who([nodes[c.start] for c in members])
        if first.reason == "cycle":
            cyc = set(first.cycle)
            who = _who([nodes[k] for k in first.cycle])
            path = "".join(
                f" → ({kind}) → {nodes[k].label}" for kind, k in first.steps if k not in cyc
            )
            text = _end_text(first, nodes, out, procs)
            head = who if first.start in cyc and not path else f"{starts}{path} → {who}"
            lines.append(f"{head}: {text}")
            reasons.append(first.reason)
            line_ends.append(tuple(first.cycle))
            ends.extend(k for k in first.cycle if k not in ends)
            continue
        path = "".join(f" → ({kind}) → {nodes[k].label}" for kind, k in first.steps)
        short = len(members) > 1 and not first.steps
        lines.append(f"{starts}{path}: {_end_text(first, nodes, out, procs, short)}")
        reasons.append(first.reason)
        line_ends.append(tuple(dict.fromkeys(c.end for c in members)))
        ends.extend(c.end for c in members if c.end not in ends)
    return lines[:MAX_CHAINS], reasons[:MAX_CHAINS], line_ends[:MAX_CHAINS], ends


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
) -> WaitGraph:
    """The wait-for graph of ``procs``, with chains followed from ``parts``; ``working``: the
    (host, pid) of processes whose output the verdict measured moving; ``gone``: (rank, pid,
    log line) of ranks the job's log says died that no process of the capture is - nodes of
    their own, exited, waited on by the ranks waiting in a collective."""
    b = _build(bundle, procs, frozenset(working))
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


def with_graph(verdict: Verdict, ctx: Context) -> Verdict:
    """``verdict`` with the wait-for graph of ``ctx`` attached (the verdict is unchanged)."""
    try:
        graph = wait_graph(ctx.bundle, ctx.procs, ctx.participants)
    except Exception:  # a bug in the graph must not cost the verdict
        return verdict
    return msgspec.structs.replace(verdict, graph=graph)
