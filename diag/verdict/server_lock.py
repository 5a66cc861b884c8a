"""A lock kept by a server for its clients, that no live client can release.

A process can hold a lock on behalf of other processes: a multiprocessing ``Manager()``'s
server keeps every shared ``Lock`` as a lock of its own, and a client's ``acquire`` is a call
that one of the server's threads makes for it. When the client that took the lock dies, the
server keeps it held - nothing releases a lock for a connection that went away - and every
later ``acquire`` waits for ever: the client waits in a receive on its connection for the reply,
the server's thread serving it waits on the lock, untimed. The server's other threads look
like a healthy server (an accept loop, a shutdown event polled on a timer), so the job read
"idle".

Who can release it: only a request from a client. This module finds the server whose threads
block untimed on one private lock in every sample, every other thread of which accepts on a
unix socket, polls on a timer doing nothing else (``futile_poll``), or reads a connection from
one of its clients; and whose every live client (the processes holding the peers of its unix
sockets, all in the job) waits on it for a reply, or does nothing but poll on a timer or wait
for its children. No client that runs can send the release: the one that took the lock is
gone (or waits itself) - unless a client polling on a timer is no waiter's parent: a worker
that took the lock and polls for a file (or a clock) before it releases it looks the same to
the kernel, and its next wake may release it. The wait can end: ``holders`` names it, and the
rule reads idle. The waiters' parent polling on a timer polls for them (``while
any(w.is_alive())``), not for a release. A client that works, sleeps a long sleep holding the
lock, or is outside the job is no such picture; nor is a server with a TCP port (clients from
anywhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Dict, List, Optional, Sequence, Set, Tuple

from diag.model import Bundle, FdEnd, ProcessSample, ThreadSample
from diag.verdict.features import ProcSignals
from diag.verdict.futile_poll import (
    Poller,
    alive_series,
    lock_groups,
    moved_nothing,
    threads_by_tid,
    timer_poller,
)
from diag.verdict.proc_classes import per_class
from diag.verdict.thread_wait import thread_wait

_READS = frozenset({"read", "recvfrom", "recvmsg"})
_ACCEPTS = frozenset({"accept", "accept4"})
_REAPS = frozenset({"wait4", "waitid"})
Key = Tuple[str, int]


@dataclass(frozen=True)
class ServerLock:
    """A server's lock that none of its live clients can release (the module docstring)."""

    server: ProcSignals
    blocked_threads: int  # its threads waiting on the lock
    lock_in: str  # the frame they wait in
    waiters: Tuple[ProcSignals, ...]  # clients waiting on it for a reply
    idle_clients: Tuple[ProcSignals, ...]  # clients that only poll or wait for children
    held_s: Optional[float] = None  # how long its longest waiter has waited: a floor
    # A client that polls on a timer and is no waiter's parent, with its poll: it may hold the
    # lock and release it at a wake (a worker holding it while it waits for a file) - idle.
    holders: Tuple[Tuple[ProcSignals, Poller], ...] = ()


def _unix(ends: Dict[int, FdEnd], fd: Optional[int]) -> Optional[FdEnd]:
    e = ends.get(fd) if fd is not None else None
    return e if e is not None and e.kind == "unix" else None


def _clients(
    server: ProcSignals, live: Sequence[ProcSignals], last_of: Dict[Key, ProcessSample]
) -> Optional[Dict[int, ProcSignals]]:
    """{peer inode: the live process of the job holding it} for every connected unix socket
    of the server; None when a peer is held by no live process of the job (a client outside
    may release the lock)."""
    holders: Dict[int, ProcSignals] = {}
    for q in live:
        if q.key != server.key and q.key in last_of:
            for e in last_of[q.key].fd_ends:
                if e.kind == "unix":
                    holders[e.inode] = q
    last = last_of[server.key]
    own = {e.inode for e in last.fd_ends}
    out: Dict[int, ProcSignals] = {}
    for e in last.fd_ends:
        if e.kind != "unix" or e.peer_inode is None or e.peer_inode in own:
            continue
        holder = holders.get(e.peer_inode)
        if holder is None:
            return None
        out[e.peer_inode] = holder
    return out


def _serving(bundle: Bundle, ts: Sequence[ThreadSample], ends: Dict[int, FdEnd],
             clients: Dict[int, ProcSignals]) -> bool:  # fmt: skip
    """A thread of the server beside the lock's waiters that cannot release it by itself:
    it polls on a timer doing nothing else, accepts on a unix socket, or reads a client's
    connection - a release comes from a client."""
    if timer_poller(bundle, ts) is not None:
        return True
    if all(
        t.syscall in _ACCEPTS and t.wait_timed is False and _unix(ends, t.syscall_fd) for t in ts
    ):
        return True
    return all(
        t.syscall in _READS
        and t.wait_timed is False
        and (e := _unix(ends, t.syscall_fd)) is not None
        and e.peer_inode in clients
        for t in ts
    )


def _waits_on(q: ProcSignals, last: ProcessSample, server_inodes: Set[int]) -> bool:
    """The client's main thread waits, untimed, for a reply on a connection to the server."""
    main = next((t for t in last.threads if t.tid == last.pid), None)
    if main is None or main.syscall not in _READS or main.wait_timed is not False:
        return False
    e = _unix({x.fd: x for x in last.fd_ends}, main.syscall_fd)
    return e is not None and e.peer_inode in server_inodes and moved_nothing(q)


def _idle(bundle: Bundle, q: ProcSignals) -> bool:
    """Every thread of the client polls on a timer doing nothing else, or waits for its
    children, untimed - it sends no request."""
    if not moved_nothing(q):
        return False
    series = alive_series(bundle, q)
    threads = threads_by_tid(series)
    if len(series) < 2 or set(threads) != {t.tid for t in series[-1].threads}:
        return False
    return all(
        timer_poller(bundle, ts) is not None
        or all(t.syscall in _REAPS and t.wait_timed is False for t in ts)
        for ts in threads.values()
    )


def _polls(bundle: Bundle, q: ProcSignals) -> List[Poller]:
    """The client's threads that poll on a timer: what their wakes check (a file, a clock)
    diag cannot see - the client may hold the lock and wait for that to release it."""
    found = (timer_poller(bundle, ts) for ts in threads_by_tid(alive_series(bundle, q)).values())
    return [f for f in found if f is not None][:1]


def _one_lock(
    bundle: Bundle, series: Sequence[ProcessSample]
) -> Optional[Tuple[Dict[int, List[ThreadSample]], List[int]]]:
    """Its threads by tid and those blocked on its one lock; None when threads came or went
    (it served someone) or its threads block on no lock or on several."""
    threads = threads_by_tid(series)
    if set(threads) != {t.tid for t in series[-1].threads}:
        return None
    groups = lock_groups(bundle, threads)
    return (threads, next(iter(groups.values()))) if len(groups) == 1 else None


def _check(
    bundle: Bundle, s: ProcSignals, live: Sequence[ProcSignals], last_of: Dict[Key, ProcessSample]
) -> Optional[ServerLock]:
    series = alive_series(bundle, s)
    if not moved_nothing(s) or len(series) < 2:
        return None
    # Once per class of processes whose series read the same (proc_classes): every thread.
    found = per_class(bundle, "server_lock", s.key, partial(_one_lock, bundle, series))
    if found is None:
        return None
    threads, blocked = found
    last = series[-1]
    ends = {e.fd: e for e in last.fd_ends}
    clients = _clients(s, live, last_of)
    if not clients:
        return None
    if not all(
        _serving(bundle, ts, ends, clients) for tid, ts in threads.items() if tid not in blocked
    ):
        return None
    mine = {e.inode for e in last.fd_ends if e.kind == "unix"}
    waiters: List[ProcSignals] = []
    idle: List[ProcSignals] = []
    for q in {c.key: c for c in clients.values()}.values():
        if _waits_on(q, last_of[q.key], mine):
            waiters.append(q)
        elif _idle(bundle, q):
            idle.append(q)
        else:
            return None  # a client that runs may release it
    if not waiters:
        return None
    # A client polling on a timer that is no waiter's parent (polling for its workers) may
    # hold the lock itself and release it at a wake: the wait can end.
    parents = {(q.key[0], q.info.ppid) for q in waiters}
    holders = [(q, found) for q in idle if q.key not in parents for found in _polls(bundle, q)]
    w = thread_wait(bundle, threads[blocked[0]][-1])
    ages = [threads[tid][-1].off_cpu_s for tid in blocked]
    held = max((a for a in ages if a is not None), default=None)
    return ServerLock(
        s,
        len(blocked),
        f"`{w.caller or w.label}`",
        tuple(waiters),
        tuple(q for q in idle if all(q is not h for h, _ in holders)),
        held,
        tuple(holders[:1]),
    )


def server_lock(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[ServerLock]:
    """The job's server whose lock no live client can release, or None."""
    live = [p for p in procs if not p.dead]
    last_of: Dict[Key, ProcessSample] = {}
    for q in live:
        series = alive_series(bundle, q)
        if series:
            last_of[q.key] = series[-1]
    for s in live:
        if s.key in last_of:
            found = _check(bundle, s, live, last_of)
            if found is not None:
                return found
    return None
