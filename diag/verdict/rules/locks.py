"""Locks: a process blocked on its own locks, a file lock held outside the job, a lock cycle, a
lock whose process has no door, a lock *file* a killed build left behind."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from diag.model import Suspect
from diag.verdict.features import ProcSignals
from diag.verdict.fs_waits import fs_stalls, fs_story
from diag.verdict.lock_holder import lock_holders
from diag.verdict.participants import (
    door,
    serving_ports,
    strong_rank,
)
from diag.verdict.pileup import pile_ups
from diag.verdict.rules import words, words_files, words_output, words_server_lock
from diag.verdict.rules.base import Decision, decided
from diag.verdict.self_wait import self_waits, undrained_puts
from diag.verdict.server_lock import server_lock
from diag.verdict.situation import (
    Situation,
)
from diag.verdict.stories import (
    lock_story,
)
from diag.verdict.waits import CHILD, PEER
from diag.verdict.wording import where


def blocked_on_itself(s: Situation) -> Optional[Decision]:
    """A process whose every thread waits, untimed, on a private futex (its own locks, queues,
    events): only one of its own threads could end any of those waits, and none runs. No peer,
    port or timer can help, so this holds whatever the other ranks do - for a rank, the job
    hangs at its next collective; for another process, when nothing else moves either."""
    stuck = [p for p in s.alive if p.self_blocked]
    ranks = [p for p in stuck if strong_rank(p)]
    if not ranks and (s.progressing or s.working or not stuck):
        return None
    chosen = _odd_first(ranks or stuck)
    summary = words.blocked_on_itself(chosen)
    holders = lock_holders(s.ctx.bundle, chosen[0])
    if holders is not None:
        summary += words.lock_holder_tail(holders)
    suspects = [
        Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason=words.OWN_LOCKS_REASON)
        for q in chosen[:4]
    ]
    return decided("deadlocked", 0.8 if ranks else 0.75, summary, suspects)


def requests_pile_up(s: Situation) -> Optional[Decision]:
    """Threads accumulate across samples on one lock whose holder, inside the same frame, waits
    untimed for an event, queue or condition, and no thread of the process works: nothing will
    ever set it (its setter died - a logged "Exception in thread"). A wedged server, whatever
    its accept loop, health endpoint or log still do."""
    piles = pile_ups(s.ctx.bundle, s.alive)
    if not piles:
        return None
    pu = piles[0]
    host, pid = pu.key
    rank = next((p.rank for p in s.alive if p.key == pu.key), None)
    reason, chain = words_output.pile_up_reason(pu), words_output.pile_up_chain(pu)
    suspect = Suspect(pid=pid, rank=rank, host=host, reason=reason, chain=chain)
    return decided("deadlocked", 0.85, words_output.pile_up(pu), [suspect])


def _odd_first(stuck: Sequence[ProcSignals]) -> List[ProcSignals]:
    """Those that wait where fewest others do come first: when every rank is stuck, the one
    whose wait differs (a data loader's queue among ranks waiting for peers) is the one to
    look at - and the suspects keep only the first four."""
    places: Dict[str, int] = {}
    for p in stuck:
        places[where(p)] = places.get(where(p), 0) + 1
    return sorted(stuck, key=lambda p: places[where(p)])


def waits_on_itself(s: Situation) -> Optional[Decision]:
    """A thread blocked taking a lock a frame lower on its own stack holds, through a signal
    handler, a finalizer, a GC callback or a logging handler (``diag.verdict.self_wait``):
    no second thread, no cycle, and a timer that keeps firing made it read "idle: wakes on a
    timer". Decides when the stuck thread is a main thread, or nothing else moves."""
    found = self_waits(s.ctx.bundle, s.alive)
    if not found:
        return _put_never_drained(s)
    mains = {(p.key, p.pid) for p in s.alive}
    main = [w for w in found if (w.key, w.tid) in mains]
    if not main and (s.progressing or s.working):
        return None
    w = (main or found)[0]
    p = next(q for q in s.alive if q.key == w.key)
    summary = words.waits_on_itself(w, p.name)
    reason = words.self_wait_reason(w)
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
    return decided("deadlocked", 0.85, summary, suspects)


def _put_never_drained(s: Situation) -> Optional[Decision]:
    """A main thread blocked in ``Queue.put`` on a full queue that no thread of its process
    drains (``self_wait.undrained_puts``): its other threads woke on their timers and took
    nothing, so "a timer may end the wait" does not hold - it waits on itself."""
    found = undrained_puts(s.ctx.bundle, s.alive)
    if not found:
        return None
    w = found[0]
    p = next(q for q in s.alive if q.key == w.key)
    if not strong_rank(p) and (s.progressing or s.working):
        return None
    summary = words.put_never_drained(w, p.name)
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=words.PUT_REASON)]
    return decided("deadlocked", 0.75, summary, suspects)


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
    peers = [p for p in others if p.main_family == PEER]
    state, confidence, text, suspects = fs_story(
        st, words.fs_waiting(others), words.fs_waiters(peers)
    )
    return decided(state, confidence, text, suspects)


def waits_for_file_lock(s: Situation) -> Optional[Decision]:
    """Nothing of the job works and a process of it waits to take a file lock (``flock``,
    ``fcntl``) that a process *outside* the job holds: the holder's state is the job's. Read as
    a lock of its own, that wait looked like a deadlock to kill while the holder - a download,
    a build, another job under ``flock(1)`` - was busy; killing the job would not help. A lock
    held inside the job is left to the rules below (its holder's own wait decides)."""
    # A polling acquirer sleeps between its tries: its holder can only be a process of the job
    # (``file_locks._polled_wait``), whose own wait decides - the doors tell it.
    waits = [w for w in s.file_lock_waits if not w.polled]
    if not waits:
        return None
    w = waits[0]
    host = w.waiter.key[0]
    if not w.holders:
        summary = words_files.file_lock_unseen(w)
        return decided("unknown", 0.3, summary, [])
    outside = [h for h in w.holders if h.proc is None]
    if not outside:
        return None
    h = outside[0]
    reason = words_files.file_lock_reason(w)
    blame = [Suspect(pid=max(h.pid, 0), host=host, reason=reason)]
    if h.state in ("T", "t"):
        summary = words_files.file_lock_holder_stopped(w, h)
        return decided("deadlocked", 0.8, summary, blame)
    if h.pid <= 0 or h.state in ("?", "Z", "X"):
        summary = words_files.file_lock_holder_gone(w, h)
        return decided("unknown", 0.4, summary, blame)
    summary = words_files.file_lock_holder_busy(w, h)
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
    no door (timer, port, input) - its main thread's or a thread asleep on a timer, which
    may hold the lock - waits forever, whatever doors other processes have."""
    # A thread of the locker's own process asleep on a timer may be the lock's holder (an
    # uploader backing off inside ``with lock:``): when it wakes it releases - no door of the
    # process, not none at all.
    stuck_lockers = [
        p for p in s.lockers if not door(p, serving_ports([p])) and not p.timer_threads
    ]
    if not stuck_lockers:
        return None
    summary, suspects = lock_story(stuck_lockers, s.alive)
    return decided("deadlocked", 0.6, summary, suspects)


def lock_behind_clients(s: Situation) -> Optional[Decision]:
    """A server of the job keeps a lock for its clients, its threads serving the waiting
    clients block on it, and no live client can send the release (``server_lock``) - or only
    one that polls on a timer, which may hold it and release it at a wake: idle."""
    if s.progressing or s.working:
        return None
    found = server_lock(s.ctx.bundle, s.ctx.procs)
    if found is None:
        return None
    if found.holders:  # a client that polls may hold it: the wait can end at its wake
        q = found.holders[0][0]
        reason = words_server_lock.holder_polls_reason(found)
        suspects = [Suspect(pid=q.pid, rank=q.rank, host=q.key[0], reason=reason)]
        return decided("idle", 0.55, words_server_lock.holder_polls(found), suspects)
    p = found.server
    reason = words_server_lock.server_lock_reason(found)
    suspects = [Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=reason)]
    return decided("deadlocked", 0.65, words_server_lock.server_lock(found), suspects)


def polls_for_stale_lock_file(s: Situation) -> Optional[Decision]:
    """Nothing in the job works and its processes poll for a lock *file* to disappear (torch's
    ``FileBaton``): whoever created it is no process of the job - a build that was killed
    while it held the lock, which stays behind for ever. (A build outside the job - another
    job sharing the cache - would make this slow; its compiler on this host says so.) Not
    'idle, healthy': the job never goes on by itself; killing it does not help either, the
    next run waits on the same file. Deleting the file does."""
    if s.ports:
        return None
    pollers = [p for p in s.alive if p.main_wait and p.main_wait.label in words_files.FILE_BATONS]
    if not pollers:
        return None
    # A process of the job that waits on a child may be the build holding the lock (a rank in
    # `subprocess.run(ninja)` whose compiler is between steps): not a file left behind.
    if any(
        not p.dead and p.info.role != "launcher" and p.main_family == CHILD for p in s.ctx.procs
    ):
        return None
    label = pollers[0].main_wait.label if pollers[0].main_wait else ""
    summary = words_files.stale_lock_file(pollers, label)
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=words_files.lock_file_reason(label))
        for p in pollers[:4]
    ]
    return decided("deadlocked", 0.6, summary, suspects)
