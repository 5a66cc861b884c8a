"""Who can wake a thread's event loop: the fds its epoll instance watches and the signals the
process catches.

An event loop parked in ``epoll_wait`` with a timeout wakes on its timers, on a watched fd
turning ready, or on a signal whose handler writes to its wake-up fd. Which fds it watches is
the kernel's own list, ``/proc/PID/fdinfo/EPFD``: one ``tfd: N events: ... ino: HEX`` line per
registered fd (``EPFD`` is the call's first argument in ``/proc/PID/task/TID/syscall``). When
that list holds only the loop's own wake-up pipe (asyncio's self-pipe: a socketpair whose both
ends this process holds), no other process can wake it: only its own timers, threads and signal
handlers. ``SigCgt`` in the thread's status (already read for its context switches) says which
signals have handlers. Both are read for the main thread only - the thread a verdict names -
and the fdinfo read is capped: a server's interest list may hold 100k connections, and past the
cap it is certainly reachable from outside.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from diag.probes.procfs import ProcFS, read_capped

EPOLL_CALLS = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
MAX_WATCHED = 16  # fds recorded per interest list; the rest are counted
_FDINFO_CAP_BYTES = 4096  # ~50 tfd lines: enough to tell "its own pipe only" from a server


def epoll_fd(syscall: Optional[str], syscall_text: Optional[str]) -> Optional[int]:
    """The epoll instance's fd of a thread blocked in an epoll wait (argument 0), else None."""
    if syscall not in EPOLL_CALLS or not syscall_text:
        return None
    parts = syscall_text.split()
    try:
        return int(parts[1], 16)
    except (IndexError, ValueError):
        return None


def parse_epoll_fdinfo(text: str, cap: int = MAX_WATCHED) -> Tuple[Tuple[int, ...], int]:
    """(the watched fds, sorted, at most ``cap``; how many more) of an eventpoll fdinfo text.
    A text cut by the read cap ends in a partial line, which is not counted."""
    fds: List[int] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "tfd:" and parts[1].isdigit():
            fds.append(int(parts[1]))
    fds.sort()
    return tuple(fds[:cap]), max(0, len(fds) - cap)


def read_watched(procfs: ProcFS, pid: int, epfd: int) -> Optional[Tuple[Tuple[int, ...], int]]:
    """The fds the epoll instance ``epfd`` of ``pid`` watches (see ``parse_epoll_fdinfo``);
    None when unreadable. A list longer than the read cap counts one more than it saw."""
    data = read_capped(procfs.spath(pid, "fdinfo", str(epfd)), _FDINFO_CAP_BYTES)
    if data is None:
        return None
    fds, more = parse_epoll_fdinfo(data.decode("ascii", "replace"))
    if len(data) >= _FDINFO_CAP_BYTES:
        more += 1
    return fds, more


def parse_sig_caught(status: str) -> Optional[Tuple[int, ...]]:
    """The signal numbers with a handler, from a status text's ``SigCgt:`` hex mask."""
    at = status.find("\nSigCgt:")
    if at < 0:
        return None
    end = status.find("\n", at + 1)
    value = status[at + len("\nSigCgt:") : end if end >= 0 else len(status)].strip()
    try:
        mask = int(value, 16)
    except ValueError:
        return None
    return tuple(n + 1 for n in range(64) if mask >> n & 1)
