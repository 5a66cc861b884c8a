"""The wait-for graph's nodes: one per process (its state, label and detail), the doors to the
outside, and the builder the edge modules add to. Bounds: ``MAX_FANOUT`` edges a node,
``MAX_DEPTH`` steps a chain, ``MAX_CHAINS`` lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from diag.frameworks import union
from diag.model import (
    Bundle,
    EdgeKind,
    FdEnd,
    FdHolder,
    NodeState,
    ProcessSample,
    ThreadSample,
    WaitEdge,
    WaitNode,
    main_thread,
)
from diag.text.roles import framework_role, named
from diag.text.units import size
from diag.verdict.evidence import SPIN_PCT
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.file_locks import LockWait
from diag.verdict.flow_control import FlowStall
from diag.verdict.participants import is_rank_helper, serving_ports
from diag.verdict.proc_classes import per_class
from diag.verdict.rendezvous import StoreJoin
from diag.verdict.thread_wait import thread_wait
from diag.verdict.waits import PEER, SERVE, SLEEP
from diag.verdict.wording import where
from diag.verdict.work import computes, reads_input
from diag.vocab import WaitKind

MAX_FANOUT = 8  # edges per node: the likeliest enders first


MAX_DEPTH = 32  # steps a chain follows before giving up


MAX_CHAINS = 20  # chain lines kept (grouped: one line per way of ending)


OUTSIDE = "outside:"


OUT_CLIENTS = OUTSIDE + "clients"


OUT_NETWORK = OUTSIDE + "network"


OUT_TIMER = OUTSIDE + "timer"


OUT_STDIN = OUTSIDE + "stdin"


OUT_PEER = OUTSIDE + "peer"


OUT_STORE = OUTSIDE + "store"


# A worker its framework paused for memory: its memory falling ends the pause.
OUT_MEMORY = OUTSIDE + "memory"


_OUTSIDE_NODES: Dict[str, Tuple[str, str]] = {
    OUT_CLIENTS: ("outside: clients", "clients outside the job wait for answers"),
    OUT_NETWORK: ("outside: requests", "a request or connection from outside the job"),
    OUT_TIMER: ("outside: timer", "a timer that fires by itself"),
    OUT_STDIN: ("outside: stdin", "input someone types or pipes in"),
    OUT_PEER: ("outside: unknown peer", "a socket peer or fifo end not in the capture"),
    OUT_STORE: (
        "outside: rendezvous store",
        "the c10d store's host (rank 0, or torchrun's agent), not in the capture",
    ),
    OUT_MEMORY: ("outside: memory", "the paused process's memory falling below its threshold"),
}


_DEAD_STATES = ("stopped", "zombie", "exited")


_WORK_STATES = ("computing", "working")


_TRACKERS = union.HELPER_MARKERS  # the runtimes' own daemons (their packs' ``helpers``)


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
    """ "rank 3", "scheduler TP1", "detokenizer (pid 12)", "pid 12 cc1plus", "... on node2":
    a framework's title names the process as the sentences do (``diag.text.roles``)."""
    ranked = p.rank is not None and not is_rank_helper(p)
    role = framework_role(p.info.cmdline, p.info.name)
    host = f" on {p.key[0]}" if p.key[0] else ""
    if role is not None:
        return named(role, p.rank if ranked else None, p.pid) + host
    if ranked:
        return f"rank {p.rank}"
    name = p.info.name
    title = p.info.cmdline[0] if len(p.info.cmdline) == 1 else ""
    if name and title.startswith(name) and len(title) <= 40:
        name = title  # a process title (setproctitle) the 15-byte comm cut: VLLM::EngineCore
    return f"pid {p.pid}" + (f" {name}" if name else "") + host


def _reading(p: ProcSignals) -> bool:
    """A loader reading its files (rchar or the file offsets rise): its waits are its I/O -
    work the others' waits lead to, not a dead end."""
    return reads_input(p)


def _computing(p: ProcSignals) -> bool:
    """Useful work, as the verdict's measures define it (``diag.verdict.work``): a poll loop's
    CPU is not computing here either."""
    return reads_input(p) or computes(p)


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
    # stopped): the chain goes on through it to whom it handed them. A rank that spins in a
    # collective whose data the verdict measured flowing (megabytes: ``work.output_bytes``)
    # is that collective completing, again and again - a training loop sampled at its
    # ``all_reduce`` line every time - not a ring of ranks that can never end their waits.
    if working and state in ("blocked", "sleeping", "serving", "spinning") and not p.stale_requests:
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
        # Running outside any known wait: computing - unless the deltas say it burns nothing
        # (a native loop of a library sampled mid-call, Ray's idle core worker): a wait of its own.
        idle = p.intervals > 0 and p.compute_pct < COMPUTE_PCT
        return "blocked" if idle else "computing"
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


def threads_text(bundle: Bundle, p: ProcSignals, last: Optional[ProcessSample]) -> str:
    """``_threads_text`` of ``p``'s last live sample, once per class of processes that read
    the same (``proc_classes``): 300 threads a rank, 16,384 ranks."""
    return per_class(bundle, "threads_text", p.key, partial(_threads_text, last))


def _detail(p: ProcSignals, state: NodeState, threads: str) -> str:
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


@dataclass(frozen=True)
class Measured:
    """What ``Situation`` measured once that the wait-for graph draws edges from too: the
    frameworks' own pauses, the ranks joining a store no process of the capture hosts, and
    the participants' file-lock waits (a process of the graph that is none is asked alone)."""

    stalls: Tuple[FlowStall, ...]
    store_join: Optional[StoreJoin]
    file_lock_waits: Tuple[LockWait, ...] = ()


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
    undrained: Optional[FrozenSet[Tuple[str, int]]] = None  # graph_edges._undrained, once
    # What the situation measured that the graph reads too (None: measured here).
    measured: Optional[Measured] = None

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


def _family_of(b: _Builder, p: ProcSignals, trackers: bool = False) -> List[ProcSignals]:
    kids = b.children.get((p.key[0], p.pid), [])
    if not trackers:
        kids = [k for k in kids if not any(m in " ".join(k.info.cmdline) for m in _TRACKERS)]
    return kids


def _parent_of(b: _Builder, p: ProcSignals) -> Optional[ProcSignals]:
    if p.info.ppid is None:
        return None
    return b.by_key.get(f"{p.key[0]}/{p.info.ppid}")


def _main_thread(b: _Builder, p: ProcSignals) -> Optional[ThreadSample]:
    ps = b.last.get(p.key)
    return main_thread(ps) if ps is not None else None


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


_FEEDER_KINDS: FrozenSet[WaitKind] = frozenset(
    ("event-loop", "accept", "socket-read", "stdin", "sleep")
)


def _lock_cycle(p: ProcSignals) -> bool:
    """Threads blocked on two or more locks in every sample: they hold what the others want
    (a lock-order cycle) - no other thread of theirs can end that."""
    return len({a for _, a, _ in p.lock_waiters}) >= 2
