"""The ends of pipes, fifos and sockets a process holds: who can end a wait on one.

A read of a pipe is ended by whoever holds its write end; a recv on a unix socket by the
process holding its peer; a recv on a local TCP connection by the one holding the reverse
4-tuple. ``/proc/P/fd/N`` names each fd's object (``pipe:[INODE]``, ``socket:[INODE]``, a
path); the same inode in two processes is the same pipe. This module turns one bounded
readlink pass per process (shared with ``diag.probes.sockets``, which needs the socket inodes
anyway) into ``model.FdEnd`` records, and - when a wait's other end is held by no process of the
job - scans the host's /proc/*/fd once, within a PID and a time budget, for who holds it
(``model.FdHolder``, in ``diag.probes.fd_holders``).

What is read, per process: the readlink pass (at most ``MAX_FDS`` fds); ``fdinfo`` (its
``flags:``: the open mode) of the pipes and fifos recorded, nothing for other fds; ``stat`` of
an fd named by a path only when a thread blocks on it, or when its path is that of a fifo some
thread blocks on (a regular file is never stat'ed for nothing: one on a dead NFS server would
hang); sock_diag for the unix sockets a thread blocks on (``sock_diag.unix_peers``).

The parsers (``parse_link``, ``parse_fdinfo``, ``select_ends``) are pure; the rest is thin I/O
through the ``ProcFS`` handed in.
"""

from __future__ import annotations

import os
import stat as stat_mod
from typing import (
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from diag.model import FdEnd, FdKind, FdMode, TcpDelivery, ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import UnixSock, unix_peers

MAX_FDS = 4096  # fds read per process (a server may hold 100k sockets)
MAX_ENDS = 64  # ends recorded per process: blocked fds first, then pipes/fifos, unix, tcp
MAX_PATH = 256  # characters of a fifo's path kept
_O_ACCMODE = 0o3
_MODES: Dict[int, FdMode] = {0: "r", 1: "w", 2: "rw"}


class FdLinks(NamedTuple):
    """One readlink pass over /proc/P/fd: (fd, link) in fd order; ``more``: fds not read."""

    links: Tuple[Tuple[int, str], ...] = ()
    more: int = 0


def read_fd_links(procfs: ProcFS, pid: int, max_fds: int = MAX_FDS) -> FdLinks:
    """The fds of ``pid`` and what each names (an fd closed meanwhile is left out)."""
    fds = procfs.fds(pid)
    out: List[Tuple[int, str]] = []
    for fd in fds[:max_fds]:
        link = procfs.readlink(pid, "fd", str(fd))
        if link is not None:
            out.append((fd, link))
    return FdLinks(tuple(out), max(0, len(fds) - max_fds))


def parse_link(link: str) -> Optional[Tuple[str, int]]:
    """("pipe" | "socket", inode) of an fd link, None for anything else (a path, an
    anon_inode, ``net:[...]``)."""
    for prefix, kind in (("pipe:[", "pipe"), ("socket:[", "socket")):
        if link.startswith(prefix) and link.endswith("]"):
            digits = link[len(prefix) : -1]
            if digits.isdigit():
                return kind, int(digits)
    return None


def is_path(link: str) -> bool:
    return link.startswith("/")


def fd_mode(flags: int) -> FdMode:
    """O_RDONLY / O_WRONLY / O_RDWR of an open's flags."""
    return _MODES.get(flags & _O_ACCMODE, "?")


def parse_fdinfo(text: str) -> Tuple[FdMode, Optional[int]]:
    """(open mode, inode) of /proc/P/fdinfo/N text: ``flags:`` is octal; ``ino:`` is there on
    Linux >= 5.14 (None before): it tells an fd reused since the readlink from the same one."""
    mode: FdMode = "?"
    ino: Optional[int] = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        try:
            if key == "flags":
                mode = fd_mode(int(value, 8))
            elif key == "ino":
                ino = int(value)
        except ValueError:
            continue
    return mode, ino


def other_modes(mode: str) -> Tuple[str, ...]:
    """The modes that can end a wait on an end opened ``mode``: a writer for a reader."""
    if mode == "r":
        return ("w", "rw", "?")
    if mode == "w":
        return ("r", "rw", "?")
    return ("r", "w", "rw", "?")


def blocked_fds(threads: Iterable[ThreadSample]) -> List[int]:
    """The fds its threads block on (``syscall_fd``), the main thread's first, each once; then
    those an event loop's epoll wait watches (``watched_fds``, when the whole list was read):
    whether one is only the loop's own wake-up pipe is told by its unix peer."""
    out: List[int] = []
    watched: List[int] = []
    for t in threads:
        if t.syscall_fd is not None and t.syscall_fd not in out:
            out.append(t.syscall_fd)
        if t.watched_fds is not None and not t.watched_more:
            watched.extend(t.watched_fds)
    return out + [fd for fd in dict.fromkeys(watched) if fd not in out]


# Syscalls that wait on many fds at once, none of them recorded as the thread's fd.
_POLLS = frozenset({"poll", "ppoll", "select", "pselect6", "_newselect"})


def polled_pipe_fds(ends: Iterable[FdEnd], threads: Iterable[ThreadSample]) -> List[int]:
    """The pipe/fifo read ends (fd 3 and up) of a process one of whose threads sleeps in
    poll/select: what ``Popen.communicate`` waits on - EOF comes only when every writer has
    closed, a background grandchild included. Stdin and epoll loops are left out: those are
    a pipeline's or a server's, whose writers are expected elsewhere."""
    if not any(t.state == "S" and t.syscall in _POLLS for t in threads):
        return []
    return [e.fd for e in ends if e.kind in ("pipe", "fifo") and e.mode == "r" and e.fd >= 3]


def stat_fd_inode(procfs: ProcFS, pid: int, fd: int) -> Optional[int]:
    """st_ino of a fifo an fd names; None when it is not one (or is gone)."""
    try:
        st = os.stat(procfs.spath(pid, "fd", str(fd)))
    except OSError:
        return None
    return st.st_ino if stat_mod.S_ISFIFO(st.st_mode) else None


def read_fd_mode(procfs: ProcFS, pid: int, fd: int, inode: int) -> FdMode:
    text = procfs.try_read_text(pid, "fdinfo", str(fd))
    if text is None:
        return "?"
    mode, ino = parse_fdinfo(text)
    return mode if ino is None or ino == inode else "?"


class JobFds(NamedTuple):
    """What one process of the job gives the matching: its threads (the fds they block on),
    its readlink pass, its TCP sockets ({inode: (local, remote)}) and whether it lives in
    diag's own network namespace (where sock_diag answers for it)."""

    threads: Tuple[ThreadSample, ...]
    links: FdLinks
    tcp: Mapping[int, Tuple[str, str]]
    own_netns: bool = True
    # It listens on a TCP port: its unix sockets are looked up too (at most
    # MAX_SERVER_SOCKETS), so a front end's backends over IPC (vLLM's API server -> its
    # EngineCore over zmq ipc://) are known when its clients wait unanswered.
    serves: bool = False
    tcp_peers: Mapping[int, int] = {}  # {its TCP socket inode: the other end's, on this host}
    owed: Mapping[int, bool] = {}  # {its TCP socket inode: a reply is owed to it}
    # {its TCP socket inode: ms since data was last sent, last received} (tcp_info)
    data_ages_ms: Mapping[int, Tuple[int, int, int]] = {}
    delivery: Mapping[int, TcpDelivery] = {}  # {its TCP socket inode: data in flight, probes}


MAX_SERVER_SOCKETS = 32


class _Cand(NamedTuple):
    prio: int
    fd: int
    kind: FdKind
    inode: int
    path: str = ""
    peer: Optional[int] = None
    local: str = ""
    remote: str = ""
    owed: Optional[bool] = None
    # tcp: ms since data last sent, last received; bytes received (tcpi_bytes_received)
    ages_ms: Optional[Tuple[int, int, int]] = None
    delivery: Optional[TcpDelivery] = None


def select_ends(cands: Sequence[_Cand], cap: int = MAX_ENDS) -> Tuple[List[_Cand], int]:
    """The ``cap`` likeliest ends (by priority, then fd) and how many did not fit."""
    ordered = sorted(cands, key=lambda c: (c.prio, c.fd))
    return ordered[:cap], max(0, len(ordered) - cap)


def parse_proc_net_unix(text: str) -> Set[int]:
    """The inodes of /proc/net/unix (the fallback where sock_diag does not answer: no peer)."""
    out: Set[int] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 7 and fields[6].isdigit():
            out.add(int(fields[6]))
    return out


UnixLookup = Callable[[Iterable[int]], Dict[int, UnixSock]]


class _Scan:
    """What the blocked fds of a job point at, gathered before any socket is looked up."""

    def __init__(self, job: Mapping[int, JobFds]) -> None:
        self.links: Dict[int, Dict[int, str]] = {pid: dict(j.links.links) for pid, j in job.items()}
        self.blocked: Dict[int, List[int]] = {}
        self.fifo_paths: Dict[str, Set[int]] = {}  # path -> inodes of fifos a thread blocks on
        self.fifo_of: Dict[Tuple[int, int], int] = {}  # (pid, fd) -> fifo inode (stat'ed)
        self.unix_own: Set[int] = set()
        self.unix_other: Dict[int, Set[int]] = {}  # pid -> inodes to look up in its net/unix
        self.unix_served: Set[int] = set()  # a server's sockets (asked after the blocked ones)


def job_fd_ends(
    procfs: ProcFS,
    job: Mapping[int, JobFds],
    unix_lookup: Optional[UnixLookup] = None,
    cap: int = MAX_ENDS,
) -> Dict[int, Tuple[Tuple[FdEnd, ...], int]]:
    """{pid: (its recorded ends, the ends past ``cap``)} for every process of ``job``."""
    scan = _Scan(job)
    for pid, j in job.items():
        _scan_process(procfs, scan, pid, j)
    unix = _unix_sockets(procfs, scan, unix_lookup)
    peers: Dict[int, int] = {u.peer_inode: i for i, u in unix.items() if u.peer_inode}
    out: Dict[int, Tuple[Tuple[FdEnd, ...], int]] = {}
    for pid, j in job.items():
        chosen, more = select_ends(_candidates(procfs, scan, pid, j, unix, peers), cap)
        out[pid] = (tuple(_end_of(procfs, pid, c) for c in chosen), more)
    return out


def _scan_process(procfs: ProcFS, scan: _Scan, pid: int, j: JobFds) -> None:
    """One process's blocked fds (their links read past the cap), the unix sockets to look
    up (a server's too) and the fifos stat'ed."""
    links = scan.links[pid]
    if j.serves:
        sockets = [
            parsed[1]
            for _, link in sorted(links.items())
            if (parsed := parse_link(link)) is not None
            and parsed[0] == "socket"
            and parsed[1] not in j.tcp
        ][:MAX_SERVER_SOCKETS]
        if j.own_netns and procfs.live:
            scan.unix_served.update(sockets)
        else:
            scan.unix_other.setdefault(pid, set()).update(sockets)
    mine = scan.blocked[pid] = blocked_fds(j.threads)
    for fd in mine:
        link = links.get(fd)
        if link is None:  # past the readlink cap (or opened since): read it now
            link = procfs.readlink(pid, "fd", str(fd))
            if link is None:
                continue
            links[fd] = link
        parsed = parse_link(link)
        if parsed is not None and parsed[0] == "socket" and parsed[1] not in j.tcp:
            own = j.own_netns and procfs.live
            (scan.unix_own if own else scan.unix_other.setdefault(pid, set())).add(parsed[1])
        elif parsed is None and is_path(link):
            ino = stat_fd_inode(procfs, pid, fd)
            if ino is not None:
                scan.fifo_of[pid, fd] = ino
                scan.fifo_paths.setdefault(link[:MAX_PATH], set()).add(ino)


def _unix_sockets(
    procfs: ProcFS, scan: _Scan, unix_lookup: Optional[UnixLookup]
) -> Dict[int, UnixSock]:
    """The unix sockets found: by sock_diag in diag's namespace (the blocked ones first, a
    server's after), else by each process's /proc/P/net/unix (no peers there)."""
    unix: Dict[int, UnixSock] = {}
    if scan.unix_own:
        try:
            unix = (unix_lookup or unix_peers)(scan.unix_own)
        except OSError:
            text = procfs.read_global("net", "unix") or ""
            unix = {i: UnixSock(None) for i in parse_proc_net_unix(text) & scan.unix_own}
    served = scan.unix_served - scan.unix_own
    if served:
        try:
            unix.update((unix_lookup or unix_peers)(served))
        except OSError:
            pass  # the blocked ones decided; a server's backends are a bonus
    for pid, inodes in scan.unix_other.items():
        text = procfs.try_read_text(pid, "net", "unix") or ""
        unix.update({i: UnixSock(None) for i in parse_proc_net_unix(text) & inodes})
    return unix


def _candidates(
    procfs: ProcFS,
    scan: _Scan,
    pid: int,
    j: JobFds,
    unix: Dict[int, UnixSock],
    peers: Dict[int, int],
) -> List[_Cand]:
    """Every end of one process worth recording, ranked: the blocked ones first (0), then
    pipes and fifos, unix sockets, TCP."""
    waits_on = set(scan.blocked[pid])
    cands: List[_Cand] = []
    for fd, link in sorted(scan.links[pid].items()):
        top = 0 if fd in waits_on else None
        parsed = parse_link(link)
        if parsed is not None:
            kind, inode = parsed
            if kind == "pipe":
                cands.append(_Cand(1 if top is None else 0, fd, "pipe", inode))
            elif inode in unix:
                u = unix[inode]
                cands.append(
                    _Cand(2 if top is None else 0, fd, "unix", inode, u.path, u.peer_inode)
                )
            elif inode in peers:
                cands.append(_Cand(2 if top is None else 0, fd, "unix", inode, peer=peers[inode]))
            elif inode in j.tcp:
                local, remote = j.tcp[inode]
                peer = j.tcp_peers.get(inode)
                rank = 3 if top is None else 0
                owed, ages = j.owed.get(inode), j.data_ages_ms.get(inode)
                sent = j.delivery.get(inode)
                cands.append(
                    _Cand(rank, fd, "tcp", inode, "", peer, local, remote, owed, ages, sent)
                )
            continue
        if not is_path(link):
            continue
        path = link[:MAX_PATH]
        ino = scan.fifo_of.get((pid, fd))
        if ino is None and path in scan.fifo_paths:
            ino = stat_fd_inode(procfs, pid, fd)
            if ino not in scan.fifo_paths[path]:
                ino = None
        if ino is not None:
            cands.append(_Cand(1 if top is None else 0, fd, "fifo", ino, path))
    return cands


def _end_of(procfs: ProcFS, pid: int, c: _Cand) -> FdEnd:
    """The recorded end: a pipe's or fifo's mode read from its fdinfo, a socket's both ways."""
    mode: FdMode = "?"
    if c.kind in ("pipe", "fifo"):
        mode = read_fd_mode(procfs, pid, c.fd, c.inode)
    elif c.kind in ("unix", "tcp"):
        mode = "rw"
    return FdEnd(
        fd=c.fd,
        kind=c.kind,
        inode=c.inode,
        mode=mode,
        peer_inode=c.peer,
        local=c.local,
        remote=c.remote,
        path=c.path,
        owed=c.owed,
        last_sent_s=c.ages_ms[0] / 1000 if c.ages_ms else None,
        last_recv_s=c.ages_ms[1] / 1000 if c.ages_ms else None,
        bytes_in=c.ages_ms[2] if c.ages_ms else None,
        delivery=c.delivery,
    )
