"""Edges read from file descriptors: a pipe, unix socket or TCP connection a thread waits on, and
who holds its other end (by inode: inside the job, or outside it on this host); file locks;
stdin fed by a process of the job.
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Set, Tuple

import msgspec

from diag.model import (
    FdEnd,
    ThreadSample,
)
from diag.verdict.features import ProcSignals
from diag.verdict.file_locks import holder_label, lock_waits
from diag.verdict.graph_nodes import (
    _WRITES,
    MAX_FANOUT,
    OUT_NETWORK,
    OUT_PEER,
    OUT_TIMER,
    OUTSIDE_JOB,
    _Builder,
    _family_of,
    _feeder_door,
    _main_thread,
    _parent_of,
    _request_servers,
    is_outside,
    label_of,
    node_key,
)
from diag.verdict.participants import serving_ports
from diag.verdict.thread_wait import thread_wait
from diag.verdict.wording import where
from diag.vocab import WaitKind

# A thread in one of these can take a new connection.
_TAKES_CONNECTIONS: FrozenSet[WaitKind] = frozenset({"accept", "event-loop"})


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
        thread_wait(b.bundle, t).kind in _TAKES_CONNECTIONS for t in ps.threads if t.tid != ps.pid
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
    measured = b.measured.file_lock_waits if b.measured is not None else ()
    found = [w for w in measured if w.waiter.key == p.key and not w.polled]
    found = found or lock_waits(b.bundle, [p])
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
