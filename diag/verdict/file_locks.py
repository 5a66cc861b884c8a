"""Who holds the file lock a process of the job waits for (from ``Sample.file_locks``).

A thread blocked in ``flock``/``fcntl(F_SETLKW)`` is not stuck on a lock of its own process:
the process holding a lock on the same file ends the wait when it releases it (or exits). So
the job's state is that holder's: stopped -> nothing moves until it is continued; running or
asleep in its own work (a download, a build, another job under ``flock(1)``) -> the job waits
its turn, and killing the job would not help; gone -> a process that inherited its fd holds it.

A lock library that polls (``filelock``, ``portalocker``, ``fasteners``: ``flock(LOCK_NB)``,
then sleep, then again) waits just the same, but the kernel shows a sleep and /proc/locks no
waiter line: its stack names the wait, and its holder can only be a lock /proc/locks lists as
held by another process of the job (the file it polls for is not open between its tries).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.frames import polled_lock
from diag.model import Bundle, FileLock
from diag.verdict.features import ProcSignals
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import FILE_LOCK, SLEEP


@dataclass(frozen=True)
class LockHolder:
    pid: int  # -1: an open file description lock (no owner); 0: another PID namespace
    name: str
    state: str  # /proc/PID/stat state letter; "?" when it could not be read (gone)
    proc: Optional[ProcSignals]  # the job's process, when the holder is one


@dataclass(frozen=True)
class LockWait:
    waiter: ProcSignals
    path: str  # "" when the waiter's fd was not named
    kind: str  # flock / posix / ofd / lease
    holders: Tuple[LockHolder, ...]
    read: bool  # /proc/locks was read for it (False: an older bundle, or the probe failed)
    polled: str = ""  # the lock library's frame when it polls (no waiter line in /proc/locks)


def _last_locks(bundle: Bundle, host: str) -> Tuple[FileLock, ...]:
    for sample in reversed(bundle.samples):
        if sample.file_locks and any(ps.host == host for ps in sample.processes):
            return sample.file_locks
    return ()


def lock_waits(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[LockWait]:
    """The file-lock waits of ``procs``' main threads, each with the holders /proc/locks
    named for it (the held lock of the same ordinal, else any held lock on the same file)."""
    by_key: Dict[Tuple[str, int], ProcSignals] = {p.key: p for p in procs}
    out: List[LockWait] = []
    for p in procs:
        if p.dead or p.main_wait is None:
            continue
        if p.main_wait.kind == SLEEP and p.main_stack_ids:
            polled = polled_lock(frames_of(bundle, p.main_stack_ids[-1]))
            if polled:
                out.append(_polled_wait(bundle, p, polled, by_key))
            continue
        if p.main_wait.kind != FILE_LOCK:
            continue
        locks = _last_locks(bundle, p.key[0])
        mine = next((lk for lk in locks if lk.blocked and lk.pid == p.pid), None)
        if mine is None:
            out.append(LockWait(p, "", "?", (), bool(locks)))
            continue
        held = [lk for lk in locks if not lk.blocked and lk.ordinal == mine.ordinal]
        held = held or [
            lk for lk in locks if not lk.blocked and (lk.dev, lk.inode) == (mine.dev, mine.inode)
        ]
        holders = tuple(
            LockHolder(lk.pid, lk.name, lk.state, by_key.get((p.key[0], lk.pid)))
            for lk in held
            if lk.pid != p.pid
        )
        out.append(LockWait(p, mine.path, mine.kind, holders, True))
    return out


def _polled_wait(
    bundle: Bundle, p: ProcSignals, polled: str, by_key: Dict[Tuple[str, int], ProcSignals]
) -> LockWait:
    """A polling acquirer's wait: its holders are the locks /proc/locks lists as held by
    other processes of the job - no waiter line ties it to one file, and a lock held outside
    the job is on any file of the host."""
    host = p.key[0]
    locks = _last_locks(bundle, host)
    held = [lk for lk in locks if not lk.blocked and lk.pid != p.pid and (host, lk.pid) in by_key]
    holders = tuple(LockHolder(lk.pid, lk.name, lk.state, by_key[(host, lk.pid)]) for lk in held)
    return LockWait(p, "", held[0].kind if held else "flock", holders, bool(locks), polled)


def holder_label(h: LockHolder) -> str:
    if h.pid == -1:
        return "an open file description (no owning process)"
    if h.pid == 0:
        return "a process outside diag's PID namespace"
    return f"pid {h.pid}" + (f" `{h.name}`" if h.name else "")
