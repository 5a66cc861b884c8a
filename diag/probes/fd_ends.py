"""The ends of pipes, fifos and sockets a process holds: who can end a wait on one.

A read of a pipe is ended by whoever holds its write end; a recv on a unix socket by the
process holding its peer; a recv on a local TCP connection by the one holding the reverse
4-tuple. ``/proc/P/fd/N`` names each fd's object (``pipe:[INODE]``, ``socket:[INODE]``, a
path); the same inode in two processes is the same pipe. This module turns one bounded
readlink pass per process (shared with ``diag.probes.sockets``, which needs the socket inodes
anyway) into ``model.FdEnd`` records, and - when a wait's other end is held by no process of the
job - scans the host's /proc/*/fd once, within a PID and a time budget, for who holds it
(``model.FdHolder``).

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
import time
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

from diag.model import FdEnd, FdHolder, FdKind, FdMode, ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import UnixSock, unix_peers
from diag.probes.threads import parse_name_state

MAX_FDS = 4096  # fds read per process (a server may hold 100k sockets)
MAX_ENDS = 64  # ends recorded per process: blocked fds first, then pipes/fifos, unix, tcp
MAX_PATH = 256  # characters of a fifo's path kept
HOLDER_PID_BUDGET = 20_000  # processes the host scan looks at
HOLDER_TIME_BUDGET_S = 0.2  # and for how long
MAX_HOLDERS = 64  # holders recorded per sample (a pipe inherited by a whole pool)
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
    """The fds its threads block on (``syscall_fd``), the main thread's first, each once."""
    out: List[int] = []
    for t in threads:
        if t.syscall_fd is not None and t.syscall_fd not in out:
            out.append(t.syscall_fd)
    return out


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


def _stat_inode(procfs: ProcFS, pid: int, fd: int) -> Optional[int]:
    """st_ino of a fifo an fd names; None when it is not one (or is gone)."""
    try:
        st = os.stat(procfs.path(pid, "fd", str(fd)))
    except OSError:
        return None
    return st.st_ino if stat_mod.S_ISFIFO(st.st_mode) else None


def _read_mode(procfs: ProcFS, pid: int, fd: int, inode: int) -> FdMode:
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


def job_fd_ends(
    procfs: ProcFS,
    job: Mapping[int, JobFds],
    unix_lookup: Optional[UnixLookup] = None,
    cap: int = MAX_ENDS,
) -> Dict[int, Tuple[Tuple[FdEnd, ...], int]]:
    """{pid: (its recorded ends, the ends past ``cap``)} for every process of ``job``."""
    links: Dict[int, Dict[int, str]] = {pid: dict(j.links.links) for pid, j in job.items()}
    blocked: Dict[int, List[int]] = {}
    fifo_paths: Dict[str, Set[int]] = {}  # path -> inodes of fifos some thread blocks on
    fifo_of: Dict[Tuple[int, int], int] = {}  # (pid, fd) -> fifo inode (stat'ed)
    unix_own: Set[int] = set()
    unix_other: Dict[int, Set[int]] = {}  # pid -> socket inodes to look up in /proc/P/net/unix
    unix_served: Set[int] = set()  # a server's sockets (asked after the blocked ones)
    for pid, j in job.items():
        if j.serves:
            sockets = [
                parsed[1]
                for _, link in sorted(links[pid].items())
                if (parsed := parse_link(link)) is not None
                and parsed[0] == "socket"
                and parsed[1] not in j.tcp
            ][:MAX_SERVER_SOCKETS]
            if j.own_netns and procfs.live:
                unix_served.update(sockets)
            else:
                unix_other.setdefault(pid, set()).update(sockets)
        mine = blocked[pid] = blocked_fds(j.threads)
        for fd in mine:
            link = links[pid].get(fd)
            if link is None:  # past the readlink cap (or opened since): read it now
                link = procfs.readlink(pid, "fd", str(fd))
                if link is None:
                    continue
                links[pid][fd] = link
            parsed = parse_link(link)
            if parsed is not None and parsed[0] == "socket" and parsed[1] not in j.tcp:
                (
                    unix_own if j.own_netns and procfs.live else unix_other.setdefault(pid, set())
                ).add(parsed[1])
            elif parsed is None and is_path(link):
                ino = _stat_inode(procfs, pid, fd)
                if ino is not None:
                    fifo_of[pid, fd] = ino
                    fifo_paths.setdefault(link[:MAX_PATH], set()).add(ino)
    unix: Dict[int, UnixSock] = {}
    if unix_own:
        try:
            unix = (unix_lookup or unix_peers)(unix_own)
        except OSError:
            text = procfs.read_global("net", "unix") or ""
            unix = {i: UnixSock(None) for i in parse_proc_net_unix(text) & unix_own}
    unix_served -= unix_own
    if unix_served:
        try:
            unix.update((unix_lookup or unix_peers)(unix_served))
        except OSError:
            pass  # the blocked ones decided; a server's backends are a bonus
    for pid, inodes in unix_other.items():
        text = procfs.try_read_text(pid, "net", "unix") or ""
        unix.update({i: UnixSock(None) for i in parse_proc_net_unix(text) & inodes})
    peers: Dict[int, int] = {u.peer_inode: i for i, u in unix.items() if u.peer_inode}
    out: Dict[int, Tuple[Tuple[FdEnd, ...], int]] = {}
    for pid, j in job.items():
        waits_on = set(blocked[pid])
        cands: List[_Cand] = []
        for fd, link in sorted(links[pid].items()):
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
                    cands.append(
                        _Cand(2 if top is None else 0, fd, "unix", inode, peer=peers[inode])
                    )
                elif inode in j.tcp:
                    local, remote = j.tcp[inode]
                    cands.append(
                        _Cand(
                            3 if top is None else 0,
                            fd,
                            "tcp",
                            inode,
                            peer=j.tcp_peers.get(inode),
                            local=local,
                            remote=remote,
                        )
                    )
                continue
            if not is_path(link):
                continue
            path = link[:MAX_PATH]
            ino = fifo_of.get((pid, fd))
            if ino is None and path in fifo_paths:
                ino = _stat_inode(procfs, pid, fd)
                if ino not in fifo_paths[path]:
                    ino = None
            if ino is not None:
                cands.append(_Cand(1 if top is None else 0, fd, "fifo", ino, path))
        chosen, more = select_ends(cands, cap)
        ends = []
        for c in chosen:
            mode: FdMode = "?"
            if c.kind in ("pipe", "fifo"):
                mode = _read_mode(procfs, pid, c.fd, c.inode)
            elif c.kind in ("unix", "tcp"):
                mode = "rw"
            ends.append(
                FdEnd(
                    fd=c.fd,
                    kind=c.kind,
                    inode=c.inode,
                    mode=mode,
                    peer_inode=c.peer,
                    local=c.local,
                    remote=c.remote,
                    path=c.path,
                )
            )
        out[pid] = (tuple(ends), more)
    return out


# Holders outside the job ----------------------------------------------------------------


class Wanted(NamedTuple):
    """An end a thread of the job waits on that no process of the job can end: look for its
    holders on the host. ``modes``: the modes that count (a writer for a blocked reader)."""

    inode: int
    kind: FdKind
    modes: Tuple[str, ...] = ("r", "w", "rw", "?")
    path: str = ""  # a fifo's: a holder's fd names the same path (confirmed by stat)


def unmatched_waits(
    ends: Mapping[int, Tuple[FdEnd, ...]],
    blocked: Mapping[int, Sequence[int]],
    links: Mapping[int, Iterable[str]] = {},
) -> List[Wanted]:
    """The pipe/fifo/unix/TCP ends some thread of the job blocks on whose other end no process
    of the job holds (the blocked process itself counts: it may hold the write end itself); a
    TCP end only when the other end is a socket of this host (``FdEnd.peer_inode``)."""
    holders: Dict[int, Set[str]] = {}  # inode -> the modes the job holds it in
    sockets: Set[int] = set()
    for mine in ends.values():
        for e in mine:
            holders.setdefault(e.inode, set()).add(e.mode)
            if e.kind in ("unix", "tcp"):
                sockets.add(e.inode)
    for texts in links.values():
        for link in texts:
            parsed = parse_link(link)
            if parsed is not None and parsed[0] == "socket":
                sockets.add(parsed[1])
    out: Dict[int, Wanted] = {}
    for pid, mine in ends.items():
        fds = set(blocked.get(pid, ()))
        for e in mine:
            if e.fd not in fds or e.inode in out:
                continue
            if e.kind in ("pipe", "fifo"):
                modes = other_modes(e.mode)
                if not holders.get(e.inode, set()) & set(modes):
                    out[e.inode] = Wanted(e.inode, e.kind, modes, e.path)
            elif e.kind in ("unix", "tcp") and e.peer_inode and e.peer_inode not in sockets:
                out[e.peer_inode] = Wanted(e.peer_inode, e.kind)
    return list(out.values())


class HolderScan(NamedTuple):
    holders: Tuple[FdHolder, ...]
    note: str = ""
    # Where each holder's end was found, (pid, fd) per holder: how a later sample checks it.
    fds: Tuple[Tuple[int, int], ...] = ()


def _holder_record(
    procfs: ProcFS, pid: int, inode: int, kind: FdKind, mode: FdMode
) -> Optional[FdHolder]:
    text = procfs.try_read_text(pid, "stat")
    if text is None:
        return None
    name, state = parse_name_state(text)
    return FdHolder(inode=inode, pid=pid, name=name, state=state, mode=mode, kind=kind)


def _merge_mode(a: FdMode, b: FdMode) -> FdMode:
    if a == b or b == "?":
        return a
    if a == "?":
        return b
    return "rw"


def scan_holders(
    procfs: ProcFS,
    wanted: Sequence[Wanted],
    skip: Iterable[int] = (),
    pid_budget: int = HOLDER_PID_BUDGET,
    time_budget_s: float = HOLDER_TIME_BUDGET_S,
) -> HolderScan:
    """The processes of the host (but ``skip``: the job's, and diag's own) that hold an end in
    ``wanted``: one pass over /proc/*/fd, readlinks only (plus, for a match, its fdinfo, and
    a stat of an fd whose path is a wanted fifo's). Kernel threads have no fds: an empty fd
    directory costs one listdir. Stops at ``pid_budget`` processes or ``time_budget_s``; the
    note says so."""
    if not wanted:
        return HolderScan(())
    started = time.monotonic()
    by_inode = {w.inode: w for w in wanted if w.kind != "fifo"}
    by_path = {w.path: w for w in wanted if w.kind == "fifo" and w.path}
    skipped = set(skip) | {os.getpid()}
    pids = [p for p in procfs.pids() if p not in skipped]
    found: Dict[Tuple[int, int], Tuple[FdMode, int]] = {}  # (inode, pid) -> (mode, fd)
    note = ""
    scanned = 0
    for pid in pids:
        if scanned >= pid_budget:
            note = (
                f"host fd scan stopped after {scanned} of {len(pids)} processes "
                f"(PID budget {pid_budget})"
            )
            break
        if time.monotonic() - started > time_budget_s:
            note = (
                f"host fd scan stopped after {scanned} of {len(pids)} processes "
                f"(time budget {time_budget_s * 1000:.0f} ms)"
            )
            break
        scanned += 1
        for fd in procfs.fds(pid)[:MAX_FDS]:
            link = procfs.readlink(pid, "fd", str(fd))
            if link is None:
                continue
            w: Optional[Wanted] = None
            parsed = parse_link(link)
            if parsed is not None:
                w = by_inode.get(parsed[1])
                if w is not None and (w.kind == "pipe") != (parsed[0] == "pipe"):
                    w = None
            elif link in by_path:
                w = by_path[link]
                if _stat_inode(procfs, pid, fd) != w.inode:
                    w = None
            if w is None:
                continue
            sock = w.kind in ("unix", "tcp")
            mode: FdMode = "rw" if sock else _read_mode(procfs, pid, fd, w.inode)
            if mode not in w.modes:
                continue
            key = (w.inode, pid)
            prev = found.get(key)
            found[key] = (_merge_mode(prev[0], mode) if prev else mode, prev[1] if prev else fd)
    holders: List[FdHolder] = []
    where: List[Tuple[int, int]] = []
    for (inode, pid), (mode, fd) in sorted(found.items())[:MAX_HOLDERS]:
        kind = next(w.kind for w in wanted if w.inode == inode)
        rec = _holder_record(procfs, pid, inode, kind, mode)
        if rec is not None:
            holders.append(rec)
            where.append((pid, fd))
    return HolderScan(tuple(holders), note, tuple(where))


class HolderCache:
    """Holders found in earlier samples, by inode: a wait still unmatched in the next sample
    is answered by checking that each holder's fd still names the same end (a readlink) and
    reading its state again, not by scanning the host again."""

    def __init__(self) -> None:
        self._by_inode: Dict[int, List[Tuple[FdHolder, int, str]]] = {}

    def _still(self, procfs: ProcFS, inode: int) -> Optional[List[FdHolder]]:
        cached = self._by_inode.get(inode)
        if not cached:
            return None
        out: List[FdHolder] = []
        for h, fd, link in cached:
            if procfs.readlink(h.pid, "fd", str(fd)) != link:
                return None  # closed or reused: scan again
            fresh = _holder_record(procfs, h.pid, h.inode, h.kind, h.mode)
            if fresh is None:
                return None
            out.append(fresh)
        return out

    def holders(
        self,
        procfs: ProcFS,
        wanted: Sequence[Wanted],
        skip: Iterable[int] = (),
        pid_budget: int = HOLDER_PID_BUDGET,
        time_budget_s: float = HOLDER_TIME_BUDGET_S,
    ) -> Tuple[Tuple[FdHolder, ...], str]:
        """The holders of ``wanted`` (cached ones checked, the rest scanned for) and the
        scan's note."""
        out: List[FdHolder] = []
        todo: List[Wanted] = []
        for w in wanted:
            still = self._still(procfs, w.inode)
            if still is None:
                todo.append(w)
            else:
                out.extend(still)
        keep = {w.inode for w in wanted}
        self._by_inode = {i: v for i, v in self._by_inode.items() if i in keep}
        note = ""
        if todo:
            scan = scan_holders(procfs, todo, skip, pid_budget, time_budget_s)
            note = scan.note
            for h, (pid, fd) in zip(scan.holders, scan.fds):
                link = procfs.readlink(pid, "fd", str(fd)) or ""
                self._by_inode.setdefault(h.inode, []).append((h, fd, link))
            out.extend(scan.holders)
        return tuple(out[:MAX_HOLDERS]), note
