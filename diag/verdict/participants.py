"""Who the job is, and which of its doors are open: the processes whose state is the job's
state, and the listening ports that make a still job a *server* waiting for work.

Launchers (torchrun, srun) and helpers (resource trackers) never decide a verdict. Ports say
"ready server" only when they are a service's: not a launcher's control port, not the
rendezvous port, and not the ephemeral ports gloo and NCCL open on every rank for their own
peer connections.
"""

from __future__ import annotations

import os
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import Bundle
from diag.text.roles import framework_role
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import thread_wait
from diag.verdict.waits import CHILD, PEER, SERVE, short_name
from diag.vocab import WaitKind

# Linux's default ip_local_port_range: ports the kernel hands out for bind(port 0). A rank's
# listener there is a communication library's (gloo pairs, NCCL bootstrap), not a service.
EPHEMERAL_PORTS = range(32768, 61000)


# Framework daemons that run beside the job and keep themselves busy whatever it does: their
# status logs (Ray's autoscaler prints a block every 5 s) and wake-ups are not the job's.
_HELPER_MARKERS = union.HELPER_MARKERS


def is_helper(p: ProcSignals) -> bool:
    """A helper of the job (a resource tracker, a framework daemon): it never decides."""
    text = " ".join(p.info.cmdline) + " " + p.info.name
    return p.info.role == "helper" or any(m in text for m in _HELPER_MARKERS)


# Launchers listen for their own control traffic (srun's I/O forwarding, torchrun's rendezvous),
# not for work: their ports say nothing about whether the job is a server waiting for requests.
_LAUNCHER_NAMES = union.LAUNCHERS  # every pack's launchers, torchrun's agent among them


def serving_ports(procs: Sequence[ProcSignals]) -> List[int]:
    """Listening ports that suggest a service waiting for work: not launchers', not the job's
    rendezvous port (MASTER_PORT), which every torch.distributed job holds open, and not a
    rank's ephemeral ports (gloo/NCCL listen on one per rank)."""
    ports: Dict[int, bool] = {}  # port -> held by a rank (a rank's store, not the door)
    for p in procs:
        if not p.listen_ports:  # most ranks of a big job listen on nothing: nothing to read
            continue
        # A parent of ranks is a "launcher" only while it waits on them; one that serves
        # (an HTTP front end whose workers look like ranks) keeps its port, and so does a
        # framework's API server caught running at the last sample (no wait to read: CI
        # once dropped SGLang's HTTP port and named only the scheduler's store port).
        launcher = (
            p.info.role == "launcher" and p.main_family in (CHILD, None) and not _api_server(p)
        )
        if p.dead or launcher or p.info.name in _LAUNCHER_NAMES:
            continue
        argv0 = os.path.basename(p.info.cmdline[0]) if p.info.cmdline else ""
        if argv0 in _LAUNCHER_NAMES:
            continue
        masters = {p.info.env.get(port_env, "") for _, port_env in union.STORE_ENVS}
        # Any rank, even one guessed from start order (mp.spawn passes the rank as an
        # argument), or a process waiting in a collective: its ephemeral ports are gloo's.
        rank = p.rank is not None or p.main_family == PEER
        ephemeral = [port for port in p.listen_ports if port in EPHEMERAL_PORTS]
        # Many ephemeral listeners in one process are a communication library's (gloo opens
        # one per peer pair: vLLM's TP=1 worker holds 13), rank or not.
        comm = rank or len(ephemeral) >= 3
        for port in p.listen_ports:
            if str(port) not in masters and not (comm and port in EPHEMERAL_PORTS):
                ports[port] = ports.get(port, True) and rank
    # The door before a rank's own port (SGLang's HTTP port before scheduler TP0's store),
    # well-known ports before ephemeral ones (:8000 first): summaries show the first.
    return sorted(ports, key=lambda port: (ports[port], port in EPHEMERAL_PORTS, port))


# Waits that hold a thread on one object of its own - a connection it reads, a lock, a queue,
# a child, a peer: a thread in one of them takes no new connection until it returns. A thread
# in accept, an event loop, a poll on a set of fds, running, or in a wait diag cannot name
# may be watching the listener.
_BOUND_ELSEWHERE: FrozenSet[WaitKind] = frozenset(
    {"socket-read", "stdin", "join", "condition", "lock", "result", "queue", "collective",
     "rendezvous", "synchronize", "file-lock", "write-full", "fifo-open", "disk", "stopped",
     "native-peer"}
)  # fmt: skip


def door_ports(bundle: Bundle, p: ProcSignals) -> List[int]:
    """``p``'s serving ports that are a door: a client's connection there can end one of its
    waits. A listening socket no thread accepts on - every thread of the last sample bound in
    a wait on something else (a worker that reads its one connection to a peer, a parent that
    keeps the listener it connected a child through) - only queues connections in its backlog:
    nothing wakes, so it ends no wait, however the port looks from outside."""
    ports = serving_ports([p])
    series = process_samples(bundle, p.key[0], p.pid) if ports else []
    if not series or not series[-1].threads:
        return ports
    bound = all(
        thread_wait(bundle, t).kind in _BOUND_ELSEWHERE and t.state != "R"
        for t in series[-1].threads
    )
    return [] if bound else ports


def _api_server(p: ProcSignals) -> bool:
    """The process its framework serves HTTP from (SGLang's main, ``vllm serve``)."""
    role = framework_role(p.info.cmdline, p.info.name)
    return role is not None and role.role == "API server"


def strong_rank(p: ProcSignals) -> bool:
    """A rank the job itself declared (env, argv, title), or the one a dead sibling is missing;
    not one guessed from the start order of look-alike children (a worker pool has those)."""
    return p.rank is not None and not (p.info.rank_source or "").startswith("inferred:start")


# The framework roles that run one per rank (``diag.text.roles``): a dead one is a dead rank,
# even when its rank cannot be read (a zombie keeps only a 15-byte name: "sglang::schedul").
RANK_ROLES = frozenset({"scheduler", "worker", "engine core"})


def framework_rank(p: ProcSignals) -> bool:
    """A process its framework runs per rank (an SGLang scheduler, a vLLM worker or engine
    core), by its title - known even for a zombie whose environment and argv are gone."""
    role = framework_role(p.info.cmdline, p.info.name)
    return role is not None and role.role in RANK_ROLES


def is_rank_helper(p: ProcSignals) -> bool:
    """A child of a rank that inherited its ``RANK`` (a compiler, ``sh -c``, a DataLoader or
    tokenizer worker, an inductor compile worker): part of that rank's work, not a rank."""
    return p.info.role == "helper" and p.rank is not None


def _finished_tool(p: ProcSignals, by_key: Dict[Tuple[str, int], ProcSignals]) -> bool:
    """A child that exited 0 and was reaped finished its job (a compiler, `sh -c`). So did a
    non-Python child no rank that a living parent of the job reaped (gone from /proc, its code
    unread): a compiler inductor ran, a shell - nobody can wait on it any more, and whether it
    failed is its parent's to say. Only the wait-for graph reads waits on it through a pipe."""
    if not p.dead or p.rank is not None or p.statuses[-1] != "exited":
        return False
    if p.exit_code == 0:
        return True
    if p.exit_code is not None or p.py_ok:
        return False

    def parent(q: ProcSignals) -> Optional[ProcSignals]:
        return by_key.get((q.key[0], q.info.ppid)) if q.info.ppid is not None else None

    up = parent(p)
    for _ in range(16):  # its nearest living ancestor in the job (g++ -> cc1plus: both gone)
        if up is None or not up.dead:
            break
        up = parent(up)
    return up is not None and not up.dead


def participants(procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """The processes whose state is the job's state (ranks first; never launchers/helpers)."""
    procs = [p for p in procs if not is_rank_helper(p)] or list(procs)
    # A child that exited 0 and was reaped finished its job (a compiler, `sh -c`): no event,
    # no participant. An unreaped one (a zombie) is still on show.
    by_key = {p.key: p for p in procs}  # once: every dead child walks up its parents
    procs = [p for p in procs if not _finished_tool(p, by_key)] or procs
    ranked = [p for p in procs if p.rank is not None]
    if any(strong_rank(p) for p in ranked):
        parents = {p.info.ppid for p in ranked if p.info.ppid}
        dead_siblings = [p for p in procs if p.rank is None and p.dead and p.info.ppid in parents]
        return ranked + dead_siblings
    cands = [p for p in procs if not is_helper(p)]
    cands = [p for p in cands if p.dead or p.main_family != CHILD] or cands
    python = [p for p in cands if p.py_ok or p.dead]
    # Only non-Python children left (a compiler a build runs): the Python process that waits
    # on them is the job, they are its tools.
    builders = [p for p in procs if p.py_ok and not p.dead and p.main_family == CHILD]
    return python or builders or cands or list(procs)


# Waits something outside the job can end: a request, a timer, input. Queue and lock waits are
# not doors: only another part of the job can end them.
DOOR_KINDS: FrozenSet[WaitKind] = frozenset(
    {"event-loop", "accept", "socket-read", "stdin", "sleep", "poll"}
)
_READS: FrozenSet[WaitKind] = frozenset({"event-loop", "socket-read"})


def serves(p: ProcSignals, ports: Sequence[int]) -> bool:
    """Listens on a service port and waits the way servers wait for requests: accept, an
    event loop, a socket read, or a request queue its front-end thread fills."""
    own = set(p.listen_ports) & set(ports)
    return bool(own) and p.main_family == SERVE


def door(p: ProcSignals, ports: Sequence[int]) -> bool:
    """Can something outside the job end this process's wait? A timer that fires (it woke
    during the capture, or its syscall has a timeout), a request on a listening port, input.
    An event loop or socket read with no timeout and no port waits for a peer's answer."""
    if p.main_wakeups > 0:
        return True
    wait = p.main_wait
    if wait is None or wait.kind not in DOOR_KINDS:
        return False
    untimed_read = wait.kind in _READS and wait.timed is False
    return bool(ports) or not untimed_read


# Collectives through which ranks receive work from one rank: a TP/PP server's followers wait
# in these for the next request; ranks waiting in all_reduce or barrier wait for a peer's work.
_RECEIVE_COLLECTIVES = union.RECEIVE_FRAMES  # its packs' ``receive_frames``


def receives_work(p: ProcSignals) -> bool:
    """Waits to be handed work by another rank (broadcast/scatter/recv from a source)."""
    return is_receive_collective(p.main_wait.label if p.main_wait else "")


def is_receive_collective(label: str) -> bool:
    """A frame through which ranks are handed work by one of them (``broadcast``, ...)."""
    return short_name(label) in _RECEIVE_COLLECTIVES
