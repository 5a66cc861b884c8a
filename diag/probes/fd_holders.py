"""Who holds the other end of a wait no process of the job can end: a pipe's writer, a
fifo's, a unix socket's peer, held by a process outside the job (a logger the launcher piped
into, a sidecar). Found by one scan of the host's /proc/*/fd, within a PID and a time budget,
and remembered across samples (``HolderCache``): a holder found once is checked, not searched
for again. The job's own ends are ``diag.probes.fd_ends``.
"""

from __future__ import annotations

import os
import time
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from diag.model import FdEnd, FdHolder, FdKind, FdMode
from diag.probes.fd_ends import MAX_FDS, other_modes, parse_link, read_fd_mode, stat_fd_inode
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_name_state

HOLDER_PID_BUDGET = 20_000  # processes the host scan looks at
HOLDER_TIME_BUDGET_S = 0.2  # and for how long
MAX_HOLDERS = 64  # holders recorded per sample (a pipe inherited by a whole pool)


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
    return FdHolder(
        inode=inode, pid=pid, name=name, state=state, mode=mode, kind=kind, cpu_ticks=_cpu(text)
    )


def _cpu(text: str) -> Optional[int]:
    """utime + stime (fields 14, 15) of a stat line, or None for one that is not."""
    rest = text[text.rfind(")") + 1 :].split(maxsplit=13)
    try:
        return int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


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
                if stat_fd_inode(procfs, pid, fd) != w.inode:
                    w = None
            if w is None:
                continue
            sock = w.kind in ("unix", "tcp")
            mode: FdMode = "rw" if sock else read_fd_mode(procfs, pid, fd, w.inode)
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
