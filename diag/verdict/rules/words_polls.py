"""The rules' words for timer wakes that cannot end a wait (``futile_poll``): a reader that
polls on a timer and never reads the full pipe its child blocks on, a lock whose waiters'
only running neighbours poll on a timer; a process only its own timers wake, to beat
(``self_wake``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.features import ProcSignals
from diag.verdict.futile_poll import FutilePoll, Poller
from diag.verdict.self_wake import SelfWake
from diag.verdict.wait_age import age_words, clock_words
from diag.verdict.wording import verb, where, who

FUTILE_POLL_OUTRANKS = (
    "a timer that wakes a thread which only asks again is no door: what it waits for needs "
    "an act its loop never does"
)


def _poll(p: Poller) -> str:
    return f"thread {p.thread} sleeps in {p.where} and woke {p.wakes} times"


def futile_poll(f: FutilePoll) -> str:
    """``timer_cannot_end``: the sentence for either picture."""
    polls = "; ".join(_poll(p) for p in f.polls[:2])
    others = "thread polls" if len(f.polls) == 1 else "threads poll"
    if f.kind == "pipe":
        return (
            f"{who(list(f.waiters))} {verb(list(f.waiters), 'blocks', 'block')} "
            f"writing to a full pipe (in {where(f.waiters[0])}) that pid {f.poller.pid} holds "
            f"the read end of, and pid {f.poller.pid} polls on a timer instead of reading it "
            f"({polls} during the capture, back in the same sleep each time, reading nothing). "
            "The writer waits for it to read, it waits for the writer to finish: its timer "
            "cannot end that. Kill the job; the fix: read the output while waiting "
            "(`communicate()`, a reader thread) or send it to a file"
        )
    if f.holder:
        return (
            f"{f.blocked_threads} thread(s) of pid {f.poller.pid} block on one lock in "
            f"{f.lock_in}, untimed{held_for(f)}; its likely holder, {f.holder}, waits "
            "untimed for a notify only a thread of this process could send - and the others "
            f"only block on the lock or poll on a timer ({polls} during the capture, the same "
            "stack each time, doing nothing else). Nothing will release it: kill it "
            f"(`py-spy dump --pid {f.poller.pid}` first shows who waits where); the fix: do "
            "not wait (a full queue's `put`, a condition) while holding a lock its consumer "
            "needs"
        )
    return (
        f"{f.blocked_threads} thread(s) of pid {f.poller.pid} block on one lock in "
        f"{f.lock_in}, untimed{held_for(f)}, and the only other {others} "
        f"on a timer ({polls} during the capture, the same stack each time, doing nothing "
        "else): those wakes cannot release the lock - the poller holds it while it waits for "
        "the threads that need it, or its holder is gone. Kill it (`py-spy dump --pid "
        f"{f.poller.pid}` first shows who waits where); the fix: release the lock before "
        "waiting for work that takes it"
    )


def held_for(f: FutilePoll) -> str:
    """``, for 2 min 10 s (since 03:12:09: ...)``: how long the lock has been held, from its
    longest waiter's time off the CPU (the kernel's, not the capture's length); "" unknown."""
    if f.held_s is None:
        return ""
    since = f"since {clock_words(f.held_since_s)}: " if f.held_since_s is not None else ""
    period = f.polls[0].period_s
    wakes = ""
    if period and period > 0 and f.held_s >= 2 * period:
        wakes = f", through ~{int(f.held_s / period)} of its poller's {period:g} s timer wakes"
    return (
        f", for {age_words(f.held_s)} ({since}the longest waiter's last run, from the kernel: "
        f"the lock has been held at least that long{wakes})"
    )


def futile_reason(f: FutilePoll) -> str:
    """A suspect's reason: the poller."""
    what = "never reads the pipe its child fills" if f.kind == "pipe" else "cannot release the lock"
    held = f" (held for {age_words(f.held_s)} at least)" if f.held_s is not None else ""
    return f"polls on a timer ({f.polls[0].wakes} wakes, the same stack) and {what}{held}"


SELF_WAKE_OUTRANKS = (
    "a timer is a door only while what it wakes may act; one whose every wake only reports "
    "that the process lives, in a process nothing else can wake, ends no wait"
)


def _closed(s: SelfWake) -> str:
    if s.loop_fds:
        fds = "its own wake-up pipe" if s.loop_fds == 1 else f"its own {s.loop_fds} wake-up fds"
        return (
            f"its event loop (in {where(s.proc)}) watches only {fds}, it listens on no port, "
            "holds no connection"
        )
    return (
        f"its threads (main in {where(s.proc)}) sleep or wait on its own locks and events, "
        "it listens on no port, reads no fd"
    )


def self_wake(s: SelfWake) -> str:
    """``wakes_only_itself``: the process, what can wake it, and what its wakes do."""
    p = s.proc
    name = s.log.path.rsplit("/", 1)[-1]
    return (
        f"pid {p.pid} can be woken only by its own code - {_closed(s)} and "
        "handles no signal but SIGINT - and it woke "
        f"{s.wakes} times during the capture only to log that it lives "
        f'("{s.last_line.strip()[-120:]}" in {name}). What it waits on (an asyncio Event, '
        "Future or Condition its main task awaits, a lock or event its main thread waits "
        "for) only its own tasks or threads could set, and the one that wakes only beats: "
        f"nothing will. Kill it; first `py-spy dump --pid {p.pid}` (an awaiting coroutine is "
        "on no stack: look for the task or thread that should set it and died - asyncio "
        'logs "Task exception was never retrieved" only at exit)'
    )


def self_wake_reason(s: SelfWake) -> str:
    """A suspect's reason: the process that waits on itself."""
    return f"only its own timers wake it ({s.wakes} wakes), and they only log that it lives"


def only_own_timers(p: ProcSignals, waiting: bool = True) -> str:
    """``waits_for_outside``' tail for a process nothing but its own timers can wake: idle if
    a timer of it polls something (a file, a clock), stuck if it waits on what only its own
    code could set - the capture cannot tell, time can. With no thread waiting on anything a
    timer does not end (``waiting`` False), every wake is the poll itself: idle, said so."""
    head = (
        f"; nothing but its own timers can wake pid {p.pid} (no port, no connection, no fd "
        "but its own wake-up pipe, no signal handler but SIGINT)"
    )
    if not waiting:
        return head + (
            ", and none of its threads waits on its own code (no lock, event or event loop): "
            "each sleeps on its own timer, so every wake is its poll - of a file, a clock or a "
            "flag diag cannot see. It goes on when what it polls for comes"
        )
    return head + (
        ": if a timer of it polls a "
        "file or a clock it goes on by itself, if what it awaits (an asyncio Event or "
        "Future, a lock or event) only its own code could set, it never will. Time tells: "
        "`diag watch` shows whether the wait ever ends (a log line saying it lives while it "
        "waits would tell now)"
    )
