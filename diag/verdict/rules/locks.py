"""Locks: a process blocked on its own locks, a file lock held outside the job, a lock cycle, a
lock whose process has no door, a lock *file* a killed build left behind."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect
from diag.verdict.file_locks import holder_label, lock_waits
from diag.verdict.fs_waits import fs_stalls, fs_story
from diag.verdict.participants import (
    door,
    serving_ports,
    strong_rank,
)
from diag.verdict.rules.base import Decision, decided
from diag.verdict.self_wait import self_wait_text, self_waits
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.stories import (
    lock_story,
)
from diag.verdict.waits import CHILD, PEER
from diag.verdict.wording import group_by_wait, verb, waits_phrase, where, who


def blocked_on_itself(s: Situation) -> Optional[Decision]:
    """A process whose every thread waits, untimed, on a private futex (its own locks, queues,
    events): only one of its own threads could end any of those waits, and none runs. No peer,
    port or timer can help, so this holds whatever the other ranks do - for a rank, the job
    hangs at its next collective; for another process, when nothing else moves either."""
    stuck = [p for p in s.alive if p.self_blocked]
    ranks = [p for p in stuck if strong_rank(p)]
    if not ranks and (s.progressing or s.working or not stuck):
        return None
    chosen = ranks or stuck
    p = chosen[0]
    threads = f"all its threads wait in {where(p)} and the like"
    summary = (
        f"deadlocked: {who(chosen)} can never wake by itself - {threads}, each untimed on a "
        "lock, queue or event of its own process (private futexes), so only one of its own "
        "threads could end a wait, and none runs; nothing outside can help. Kill it; "
        f"`py-spy dump --pid {p.pid}` shows who waits where (unless it waits for a signal)"
    )
    suspects = [
        Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason="blocked on its own locks")
        for q in chosen[:4]
    ]
    return decided("deadlocked", 0.8 if ranks else 0.75, summary, suspects)


def waits_on_itself(s: Situation) -> Optional[Decision]:
    """A thread blocked taking a lock a frame lower on its own stack holds, through a signal
    handler, a finalizer, a GC callback or a logging handler (``diag.verdict.self_wait``):
    no second thread, no cycle, and a timer that keeps firing made it read "idle: wakes on a
    timer". Decides when the stuck thread is a main thread, or nothing else moves."""
    found = self_waits(s.ctx.bundle, s.alive)
    if not found:
        return None
    mains = {(p.key, p.pid) for p in s.alive}
    main = [w for w in found if (w.key, w.tid) in mains]
    if not main and (s.progressing or s.working):
        return None
    w = (main or found)[0]
    p = next(q for q in s.alive if q.key == w.key)
    summary = "deadlocked: " + self_wait_text(w, p.name)
    reason = f"waits on itself: blocked in {w.blocked.name}, held by {w.holder.name} via a {w.kind}"
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
    return decided("deadlocked", 0.85, summary, suspects)


def waits_on_filesystem(s: Situation) -> Optional[Decision]:
    """A participant asleep on a FUSE or network mount in every sample waits on that
    filesystem - for a FUSE mount served here, on the daemon holding /dev/fuse for it, which
    is the suspect (``diag.verdict.fs_waits``). Its peers waiting in a collective made it read
    "rank 1 diverged: kill the job", and a restarted job would wait on the daemon again."""
    stalls = fs_stalls(s.ctx.bundle, s.alive)
    if not stalls:
        return None
    st = stalls[0]
    others = [p for p in s.alive if p.key != st.proc.key and p.main_wait and p.main_wait.kind]
    waiting = waits_phrase(group_by_wait(others)[:2])
    peers = [p for p in others if p.main_family == PEER]
    state, confidence, text, suspects = fs_story(st, waiting, who(peers) if peers else "")
    return decided(state, confidence, f"{state}: {text}", suspects)


def waits_for_file_lock(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a process of it waits to take a file lock (``flock``,
    ``fcntl``) that a process *outside* the job holds: the holder's state is the job's. Read as
    a lock of its own, that wait looked like a deadlock to kill while the holder - a download,
    a build, another job under ``flock(1)`` - was busy; killing the job would not help. A lock
    held inside the job is left to the rules below (its holder's own wait decides)."""
    waits = lock_waits(s.ctx.bundle, s.alive)
    if not waits:
        return None
    w = waits[0]
    me = who([w.waiter])
    path = f"`{w.path}`" if w.path else "its lock file"
    find = f"`fuser -v {w.path}`" if w.path else "`cat /proc/locks`"
    host = w.waiter.key[0]
    if not w.holders:
        why = "no holder is listed in /proc/locks" if w.read else "/proc/locks was not read"
        summary = (
            f"unknown: {me} waits to take a file lock ({w.kind}) on {path} in {where(w.waiter)} "
            f"and {why} - {find} names who holds it; that process, not this job, decides "
            "when it goes on"
        )
        return decided("unknown", 0.3, summary, [])
    outside = [h for h in w.holders if h.proc is None]
    if not outside:
        return None
    h = outside[0]
    held = f"{holder_label(h)} (outside the job) holds it"
    lead = f"{me} waits to take a file lock ({w.kind}) on {path} in {where(w.waiter)}: {held}"
    blame = [Suspect(pid=max(h.pid, 0), host=host, reason=f"holds the file lock on {path}")]
    if h.state in ("T", "t"):
        summary = (
            f"deadlocked: {lead}, and it is stopped (state {h.state}) - nothing moves until "
            f"`kill -CONT {h.pid}`"
        )
        return decided("deadlocked", 0.8, summary, blame)
    if h.pid <= 0 or h.state in ("?", "Z", "X"):
        summary = (
            f"unknown: {lead}, and it is gone or cannot be read - a process that inherited "
            f"its fd holds the lock now: {find} names it; that process decides when this job "
            "goes on"
        )
        return decided("unknown", 0.4, summary, blame)
    doing = "runs (state R)" if h.state == "R" else f"is asleep (state {h.state}) holding it"
    summary = (
        f"slow: {lead}, and it {doing} - this job goes on when it releases the lock; don't "
        f"kill the job, see what pid {h.pid} does (`py-spy dump --pid {h.pid}`, "
        f"`cat /proc/{h.pid}/stack`)"
    )
    return decided("slow", 0.6 if h.state == "R" else 0.45, summary, blame)


def lock_cycle(s: Situation) -> Optional[Decision]:
    """Thread locks are process-local: a cycle needs two locks in one process."""
    cycle = any(len({a for _, a, _ in p.lock_waiters if a}) >= 2 for p in s.lockers)
    if not (s.lockers and cycle):
        return None
    summary, suspects = lock_story(s.lockers, s.alive)
    return decided("deadlocked", 0.8, summary, suspects)


def lock_without_door(s: Situation) -> Optional[Decision]:
    """Only a thread of the same process can release a lock: a locker whose own process has
    no door (timer, port, input) waits forever, whatever doors other processes have."""
    stuck_lockers = [p for p in s.lockers if not door(p, serving_ports([p]))]
    if not stuck_lockers:
        return None
    summary, suspects = lock_story(stuck_lockers, s.alive)
    return decided("deadlocked", 0.6, summary, suspects)


# Locks that are a file's existence, waited for by polling it: nothing holds them open, so a
# build killed while it held one leaves it behind for good (frame -> what the lock is).
_FILE_BATONS = {
    "FileBaton.wait": (
        "torch's build lock, a `lock` file in the extension's build directory (under "
        "`$TORCH_EXTENSIONS_DIR`, default `~/.cache/torch_extensions`)"
    ),
}


def polls_for_stale_lock_file(s: Situation) -> Optional[Decision]:
    """Nothing in the job works and its processes poll for a lock *file* to disappear (torch's
    ``FileBaton``): whoever created it is no process of the job - a build that was killed
    while it held the lock, which stays behind for ever. (A build outside the job - another
    job sharing the cache - would make this slow; its compiler on this host says so.) Not
    'idle, healthy': the job never goes on by itself; killing it does not help either, the
    next run waits on the same file. Deleting the file does."""
    if s.ports:
        return None
    pollers = [p for p in s.alive if p.main_wait and p.main_wait.label in _FILE_BATONS]
    if not pollers:
        return None
    # A process of the job that waits on a child may be the build holding the lock (a rank in
    # `subprocess.run(ninja)` whose compiler is between steps): not a file left behind.
    if any(
        not p.dead and p.info.role != "launcher" and p.main_family == CHILD for p in s.ctx.procs
    ):
        return None
    label = pollers[0].main_wait.label if pollers[0].main_wait else ""
    summary = (
        f"deadlocked: {who(pollers)} {verb(pollers, 'polls', 'poll')} in `{label}` for a lock "
        f"file to go away - {_FILE_BATONS[label]} - and no process of the job builds: the lock "
        "was left by a build that was killed (unless a build outside the job holds it: then "
        "wait for it). If no compiler runs on this host (`pgrep -af 'ninja|cc1plus|nvcc'`), "
        "delete that `lock` file: the job goes on by itself - killing it would not help, the "
        "next run waits on the same file"
    )
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=f"polls in `{label}` for a lock file")
        for p in pollers[:4]
    ]
    return decided("deadlocked", 0.6, summary, suspects)
