"""The rules' words for a lock a server keeps for its clients that no live client can release
(``server_lock``): a multiprocessing manager's shared Lock whose holder was killed.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.server_lock import ServerLock
from diag.verdict.wait_age import age_words
from diag.verdict.wording import verb, where, who

SERVER_LOCK_OUTRANKS = (
    "a lock a server keeps for its clients is released only by a client's request; when "
    "every live client waits on it or only polls, its accept loop and timers end nothing"
)


def _idle(lock: ServerLock) -> str:
    if not lock.idle_clients:
        return "its only clients are those waiting"
    return (
        f"its other {'client' if len(lock.idle_clients) == 1 else 'clients'} "
        f"({who(list(lock.idle_clients))}) only "
        f"{verb(list(lock.idle_clients), 'polls', 'poll')} on a timer or "
        f"{verb(list(lock.idle_clients), 'waits', 'wait')} for children, sending nothing"
    )


def server_lock(lock: ServerLock) -> str:
    """``lock_behind_clients``: the waiting clients, the server's lock, who could release it."""
    s = lock.server
    waiters = list(lock.waiters)
    held = f" (for {age_words(lock.held_s)} at least)" if lock.held_s else ""
    return (
        f"{who(waiters)} {verb(waiters, 'waits', 'wait')} in {where(waiters[0])} for pid "
        f"{s.pid} to answer - a server of the job whose {lock.blocked_threads} thread(s) "
        f"serving them block on one lock in {lock.lock_in}, untimed{held}. Only a "
        f"client's request can release a lock it keeps, and none will: {_idle(lock)}. The "
        "client that took the lock is gone - a process killed holding a shared lock (Python's "
        "multiprocessing Manager, for one, never releases a lock for a client that went "
        "away). Kill "
        "the job; the fix: `acquire(timeout=...)`, and a lock the kernel releases with its "
        "holder (`fcntl.flock` on a file) where a holder may be killed"
    )


def holder_polls(lock: ServerLock) -> str:
    """``lock_behind_clients``, idle: a live client that polls on a timer may hold the lock
    and release it at a wake - the waiters go on when it does."""
    s = lock.server
    waiters = list(lock.waiters)
    held = f" (for {age_words(lock.held_s)} at least)" if lock.held_s else ""
    q, poll = lock.holders[0]
    every = f", every ~{poll.period_s:.2g} s" if poll.period_s else ""
    return (
        f"{who(waiters)} {verb(waiters, 'waits', 'wait')} in {where(waiters[0])} for pid "
        f"{s.pid} to answer - a server of the job whose {lock.blocked_threads} thread(s) "
        f"serving them block on one lock in {lock.lock_in}, untimed{held}. Only a client's "
        f"request can release a lock it keeps, and {who([q])} may: it is alive and polls on "
        f"a timer in {poll.where} (woke {poll.wakes} times{every}) - a client holding the "
        "lock while it waits for what diag cannot see (a file, a clock) releases it at the "
        f"wake that finds it, and {verb(waiters, 'the waiter goes', 'the waiters go')} on. "
        f"Healthy if {who([q])} should hold the lock that long; if not, it is the one to "
        f"look at: `py-spy dump --pid {q.pid}`"
    )


def holder_polls_reason(lock: ServerLock) -> str:
    """The suspect's reason: the client that may hold the lock."""
    n = len(lock.waiters)
    return f"polls on a timer and may hold pid {lock.server.pid}'s lock; {n} client(s) wait on it"


def server_lock_reason(lock: ServerLock) -> str:
    """A suspect's reason: the server keeping the lock."""
    n = len(lock.waiters)
    return f"keeps a lock for a client that is gone; {n} client(s) wait on it for ever"
