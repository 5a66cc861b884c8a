"""The rules' words for file locks: who holds a lock file the job waits to take, and a lock
file nobody holds that the job polls for. Part of ``rules.words`` (which re-exports every name
here); apart only to keep each module short.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Optional, Sequence

from diag.frameworks import union
from diag.verdict.features import ProcSignals
from diag.verdict.file_locks import LockHolder, LockWait, holder_label
from diag.verdict.wait_age import age_words
from diag.verdict.wording import verb, where, who


def _lock_path(w: LockWait) -> str:
    return f"`{w.path}`" if w.path else "its lock file"


def _lock_finder(w: LockWait) -> str:
    return f"`fuser -v {w.path}`" if w.path else "`cat /proc/locks`"


def _takes(w: LockWait) -> str:
    """How the waiter takes the lock: blocked in the kernel, or a library's retry loop."""
    if w.polled:
        return (
            f"polls to take a file lock in `{w.polled}` (flock with LOCK_NB, a sleep, again: "
            "no waiter line in /proc/locks)"
        )
    return f"waits to take a file lock ({w.kind}) on {_lock_path(w)} in {where(w.waiter)}"


def polled_lock_unseen(w: LockWait) -> str:
    """``waits_for_outside``: a polling acquirer whose holder the bundle does not name."""
    why = (
        "no other process of the job holds a lock in /proc/locks (the holder is outside it)"
        if w.read
        else "diag recorded no holder (/proc/locks was not read: a bundle of an older diag, "
        "or the probe failed)"
    )
    return (
        f"{who([w.waiter])} {_takes(w)}, and {why} - it goes on when the holder "
        "releases the lock, not on a timer of its own: `lslocks -o PID,PATH` names the "
        "holder, and that process decides (`py-spy dump` it; kill the job only if the holder "
        "is gone)"
    )


def file_lock_unseen(w: LockWait) -> str:
    """``waits_for_file_lock``, no holder known: where to look for the one that decides."""
    why = "no holder is listed in /proc/locks" if w.read else "/proc/locks was not read"
    return (
        f"{who([w.waiter])} {_takes(w)} and {why} - {_lock_finder(w)} names who "
        "holds it; that process, not this job, decides when it goes on"
    )


def file_lock_held_in_job(
    w: LockWait, h: LockHolder, holder: ProcSignals, wakes_in_s: Optional[float] = None
) -> str:
    """``waits_for_file_lock``: another process of the job holds the lock and waits on a door
    (a timer, a port) itself - the waiter goes on when it releases. A holder asleep on a
    timer says when it wakes (the kernel's deadline), so the reader can tell a short pause
    from an hour's sleep with the lock held."""
    how = "it wakes by itself, or a request or a timer wakes it"
    if wakes_in_s is not None:
        how = f"asleep: it wakes by itself in ~{age_words(max(1.0, wakes_in_s))}"
    return (
        f"{who([w.waiter])} {_takes(w)}: {holder_label(h)}, of this job, holds it and "
        f"waits in {where(holder)} ({how}) - "
        f"{who([w.waiter])} goes on when it releases the lock. Healthy if it holds it for a "
        "reason (a download, a build it waits for); if it should have let go by now, it is "
        f"the one to look at: `py-spy dump --pid {h.pid}`"
    )


def _lock_lead(w: LockWait, h: LockHolder) -> str:
    held = f"{holder_label(h)} (outside the job) holds it"
    return (
        f"{who([w.waiter])} waits to take a file lock ({w.kind}) on {_lock_path(w)} in "
        f"{where(w.waiter)}: {held}"
    )


def file_lock_holder_stopped(w: LockWait, h: LockHolder) -> str:
    """``waits_for_file_lock``: the holder outside the job is stopped (state T or t)."""
    return (
        f"{_lock_lead(w, h)}, and it is stopped (state {h.state}) - nothing moves "
        f"until `kill -CONT {h.pid}`"
    )


def file_lock_holder_gone(w: LockWait, h: LockHolder) -> str:
    """``waits_for_file_lock``: the holder outside the job is gone or cannot be read."""
    return (
        f"{_lock_lead(w, h)}, and it is gone or cannot be read - a process that "
        f"inherited its fd holds the lock now: {_lock_finder(w)} names it; that process "
        "decides when this job goes on"
    )


def file_lock_holder_busy(w: LockWait, h: LockHolder) -> str:
    """``waits_for_file_lock``: the holder runs or sleeps holding the lock - wait for it."""
    doing = "runs (state R)" if h.state == "R" else f"is asleep (state {h.state}) holding it"
    return (
        f"{_lock_lead(w, h)}, and it {doing} - this job goes on when it releases the "
        f"lock; don't kill the job, see what pid {h.pid} does (`py-spy dump --pid {h.pid}`, "
        f"`cat /proc/{h.pid}/stack`)"
    )


def file_lock_reason(w: LockWait) -> str:
    """The suspect of ``waits_for_file_lock``: the holder outside the job."""
    return f"holds the file lock on {_lock_path(w)}"


# Locks that are a file's existence, waited for by polling it: nothing holds them open, so a
# build killed while it held one leaves it behind for good (frame -> what the lock is; the
# frames are what ``polls_for_stale_lock_file`` looks for).
FILE_BATONS = union.FILE_BATONS


def stale_lock_file(pollers: Sequence[ProcSignals], label: str) -> str:
    """``polls_for_stale_lock_file``: ``pollers`` poll in ``label`` (of ``FILE_BATONS``)."""
    return (
        f"{who(pollers)} {verb(pollers, 'polls', 'poll')} in `{label}` for a lock "
        f"file to go away - {FILE_BATONS[label]} - and no process of the job builds: the lock "
        "was left by a build that was killed (unless a build outside the job holds it: then "
        "wait for it). If no compiler runs on this host (`pgrep -af 'ninja|cc1plus|nvcc'`), "
        "delete that `lock` file: the job goes on by itself - killing it would not help, the "
        "next run waits on the same file"
    )


def lock_file_reason(label: str) -> str:
    """A suspect of ``polls_for_stale_lock_file``: where it polls."""
    return f"polls in `{label}` for a lock file"
