"""File locks a thread of the job waits for, and who holds them (``/proc/locks``).

A thread blocked in ``flock(fd, LOCK_EX)`` or ``fcntl(F_SETLKW)`` (wchan
``locks_lock_inode_wait``, ``flock_lock_inode_wait``...) waits for another process: the one
holding a lock on the same file - a download or a build serialised on a lock file, a shell's
``flock(1)``, a GPU-assignment lock. Read as a lock of its own process, that wait looks like a
deadlock to kill; it is ended by the holder, and the holder's state says what the job waits
for. ``/proc/locks`` lists every lock on the host: one line per held lock, and after it a
``->`` line per waiter, with the same ordinal::

    1: FLOCK  ADVISORY  WRITE 17150 fe:00:2155416 0 EOF
    1: -> FLOCK  ADVISORY  WRITE 17152 fe:00:2155416 0 EOF

A lock library that polls (``filelock``: ``flock(LOCK_NB)``, a sleep, again) leaves no ``->``
line: for it, the locks the job's own processes hold are kept (``job``), and the verdict takes
them for its holders (``diag.frames.polled_lock`` tells the stack).

Only read when a thread of the job waits on a file lock or polls for one (the collector
decides), and bounded:
``MAX_LOCKS_BYTES`` of the file, ``MAX_RECORDS`` records kept, the name and state of at most
``MAX_HOLDERS`` holders read. The file's path comes from the waiter's own fd (a readlink; the
file itself is never opened or stat'ed - it may sit on a dead NFS server). A pid of -1 (an
open file description lock, which no process owns) or 0 (outside diag's PID namespace) is kept
as it is: the holder is then unknown, and the verdict says how to find it (``fuser PATH``).

``parse_locks`` is pure; ``job_file_locks`` is the thin I/O through the ``ProcFS`` handed in.
"""

from __future__ import annotations

import re
from typing import AbstractSet, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from diag.model import FileLock, FileLockKind
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_name_state

MAX_LOCKS_BYTES = 1024 * 1024  # of /proc/locks read (a host with 10k locks is ~700 kB)
MAX_RECORDS = 32  # locks recorded per sample: the job's waits and the locks blocking them
MAX_HOLDERS = 16  # holders whose name and state are read
MAX_PATH = 256  # characters of a lock file's path kept

_LINE = re.compile(
    r"^\s*(\d+):\s+(->\s+)?(\w+)\s+\S+\s+(\w+)\s+(-?\d+)\s+"
    r"([0-9a-fA-F]+):([0-9a-fA-F]+):(\d+)\s"
)
_KINDS: Dict[str, FileLockKind] = {
    "FLOCK": "flock",
    "POSIX": "posix",
    "OFDLCK": "ofd",
    "LEASE": "lease",
    "DELEG": "lease",
}


class LockLine(NamedTuple):
    """One parsed line of /proc/locks."""

    ordinal: int  # a waiter has its blocker's ordinal
    blocked: bool  # a "->" line: this pid waits for the lock
    kind: FileLockKind
    access: str  # READ / WRITE / (for leases) BREAKING...
    pid: int
    dev: str  # "fe:00"
    inode: int


def parse_locks(text: str, max_records: int = 100_000) -> List[LockLine]:
    """The lines of /proc/locks (a line it cannot read is skipped)."""
    out: List[LockLine] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        out.append(
            LockLine(
                ordinal=int(m.group(1)),
                blocked=m.group(2) is not None,
                kind=_KINDS.get(m.group(3), "?"),
                access=m.group(4),
                pid=int(m.group(5)),
                dev=f"{m.group(6)}:{m.group(7)}".lower(),
                inode=int(m.group(8)),
            )
        )
        if len(out) >= max_records:
            break
    return out


def select_locks(
    lines: Sequence[LockLine],
    waiters: Set[int],
    cap: int = MAX_RECORDS,
    job: AbstractSet[int] = frozenset(),
) -> List[LockLine]:
    """The job's waits (``->`` lines of ``waiters``) and the held locks blocking them: the
    line of the same ordinal, else (older kernels list waiters apart) any held lock on the same
    file; then the locks processes of ``job`` hold (asked for when one of its threads polls
    for a lock: a poller has no ``->`` line). At most ``cap`` lines, the job's waits first."""
    waits = [ln for ln in lines if ln.blocked and ln.pid in waiters]
    ordinals = {ln.ordinal for ln in waits}
    files = {(ln.dev, ln.inode) for ln in waits}
    held = [ln for ln in lines if not ln.blocked and ln.ordinal in ordinals]
    blocking = {ln.ordinal for ln in held}
    held += [
        ln
        for ln in lines
        if not ln.blocked and (ln.dev, ln.inode) in files and ln.ordinal not in blocking
    ]
    kept = {ln.ordinal for ln in held}
    held += [ln for ln in lines if not ln.blocked and ln.pid in job and ln.ordinal not in kept]
    return (waits + held)[:cap]


def _name_state(procfs: ProcFS, pid: int) -> Tuple[str, str]:
    text = procfs.try_read_text(pid, "stat") if pid > 0 else None
    return parse_name_state(text) if text else ("", "?")


def _read_locks(procfs: ProcFS) -> Tuple[str, bool]:
    """(text, cut): at most ``MAX_LOCKS_BYTES`` of /proc/locks; cut when there was more."""
    with open(procfs.root / "locks", "rb") as fh:
        data = fh.read(MAX_LOCKS_BYTES + 1)
    cut = len(data) > MAX_LOCKS_BYTES
    if cut:
        data = data[: data.rfind(b"\n", 0, MAX_LOCKS_BYTES) + 1]
    return data.decode("utf-8", "replace"), cut


def job_file_locks(
    procfs: ProcFS, waiter_fds: Mapping[int, Optional[int]], job: AbstractSet[int] = frozenset()
) -> Tuple[Tuple[FileLock, ...], str]:
    """The file locks the processes ``waiter_fds`` ({pid: the fd its thread blocks on, when
    known}) wait for and their holders, and the locks the processes ``job`` hold (when one
    of its threads polls for a lock); and a note when /proc/locks was cut short."""
    text, cut = _read_locks(procfs)
    chosen = select_locks(parse_locks(text), set(waiter_fds), job=job)
    holders_read = 0
    out: List[FileLock] = []
    for ln in chosen:
        name, state, path = "", "?", ""
        if ln.blocked:
            fd = waiter_fds.get(ln.pid)
            link = procfs.readlink(ln.pid, "fd", str(fd)) if fd is not None else None
            path = (link or "")[:MAX_PATH]
        if holders_read < MAX_HOLDERS:
            name, state = _name_state(procfs, ln.pid)
            holders_read += 1
        out.append(
            FileLock(
                pid=ln.pid,
                ordinal=ln.ordinal,
                blocked=ln.blocked,
                kind=ln.kind,
                write=ln.access == "WRITE",
                dev=ln.dev,
                inode=ln.inode,
                path=path,
                name=name,
                state=state,
            )
        )
    note = f"/proc/locks is over {MAX_LOCKS_BYTES} bytes: only its start was read" if cut else ""
    return tuple(out), note


# Where a thread sleeps when it waits for a file lock (flock, and fcntl/lockf's F_SETLKW).
_LOCK_WCHANS = (
    "locks_lock_inode_wait",
    "flock_lock_inode_wait",
    "posix_lock_inode_wait",
    "locks_lock_file_wait",
    "fcntl_setlk",
    "__flock",
    "flock_lock",
    "do_lock_file",
)


def waits_on_file_lock(wchan: Optional[str], syscall: Optional[str]) -> bool:
    """A sleeping thread blocked taking a file lock (its syscall, else its wait channel)."""
    if syscall in ("flock", "fcntl"):
        return True
    return bool(wchan) and str(wchan).startswith(_LOCK_WCHANS)
