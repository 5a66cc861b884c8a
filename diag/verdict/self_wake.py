"""A process only its own code can wake, whose wakes only say it is alive.

Who can end a wait decides between idle and deadlocked. A port, a connection, a pipe from
another process, stdin, a signal with a handler: someone outside may act. A timer wakes the
process itself - a door only while what it wakes may act on the world. This module finds the
process for which the kernel says nothing but itself can wake it, in every sample:

- no listening port, no connection: its only sockets (``socket_fds``, the readlink pass) are
  wake-up pairs it holds both ends of;
- every thread sleeps on a timer, waits on a private futex (a lock, event or queue of its own
  process: op & 0x80), or - an event loop - in ``epoll_wait`` on an interest list
  (``/proc/PID/fdinfo/EPFD``) that holds only unix sockets whose peer it holds itself (the
  loop's wake-up pipe); nothing blocks reading an fd, nothing polls an fd set unseen;
- no signal has a handler but SIGINT (every Python process catches it: Ctrl-C ends, it does
  not deliver work) and the C library's own thread signals;

and it woke during the capture (a timer fires) while its only output was lines that say it
lives (``progress.is_heartbeat``: "alive beat=41", "tick 7"). An asyncio task awaiting an
Event, Future or Condition that only another task of the loop would set, behind a heartbeat
task, is this picture: py-spy shows only the loop in ``select`` (a suspended coroutine is on
no thread's stack), but the loop's only wakes are its heartbeat's timer, and a timer that only
reports it lives sets nothing. Threads are the same: a main thread on an Event beside a thread
that logs ``alive`` every second. What stays out: a loop watching a socket, a pipe or a
listening port (an idle server, a subscriber); a process with a SIGTERM/SIGHUP handler (a
daemon that runs until told); a timer that writes anything but liveness (a cron-like job); a
silent timer (it may poll a file or a clock: nothing here tells); and a timer whose lines say
what it waits or polls for ("waiting for a new checkpoint in /ckpts", "no new file, retrying"):
those wakes check something diag cannot see - an evaluation job polling a directory for the
next checkpoint is idle, and had read "deadlocked: kill it". And a process none of whose threads
waits on anything a timer does not end (``holds_a_waiter``: an untimed lock, event or queue wait,
or an event loop, whose awaited coroutine is on no stack): every thread sleeps on its own
timer, so nothing waits on its own code - each wake is the poll itself. A daemon checking for a
flag file every second and logging ``alive tick=N`` from the same loop is idle, and so is
its main thread joining that loop's thread (a join waits for a live thread of its own, the
one that wakes); both had read "deadlocked: kill it".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from diag.model import Bundle, FdEnd, ProcessSample, ThreadSample
from diag.verdict.features import ProcSignals
from diag.verdict.progress import LogGrowth
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import thread_wait
from diag.vocab import WaitKind

MIN_WAKES = 2  # voluntary context switches of its threads during the capture: a timer fired
# Handlers no program installs to be woken: SIGINT (every Python process catches it: Ctrl-C
# ends, it does not deliver work) and the C library's own thread signals (glibc reserves 32
# and 33 for thread cancellation and set*id; SIGRTMIN is 34).
_NOT_A_DOOR = frozenset({2, 32, 33})
_FUTEX_PRIVATE = 0x80
_SLEEPS = frozenset({"nanosleep", "clock_nanosleep"})
_EPOLL = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
# A line that names what its timer waits or polls for: the wake checks the world (a file, a
# directory, a service), which no kernel record of the process shows - liveness it is not.
_POLLS_FOR = re.compile(
    r"\b(wait(s|ing)? (for|on|until)|poll(s|ing)?|check(s|ing)?|look(s|ing)? for|retry(ing)?|"
    r"no new|not (yet )?(found|ready|available|there)|nothing (new|to do|yet))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SelfWake:
    """A process whose only wakes are its own timers, reporting that it lives."""

    proc: ProcSignals
    wakes: int  # voluntary context switches of its threads over the capture
    loop_fds: int  # fds its event loop watches (all its own wake-up pipe); 0: no loop
    log: LogGrowth  # the log whose only news is liveness
    last_line: str  # its last liveness line


def _series(bundle: Bundle, p: ProcSignals) -> List[ProcessSample]:
    host, pid = p.key
    return [q for q in process_samples(bundle, host, pid) if q.state not in ("Z", "X")]


def _own_end(fd: int, ends: Dict[int, FdEnd], own: FrozenSet[int]) -> bool:
    """A watched fd that is a unix socket whose peer this process holds: its wake-up pipe."""
    e = ends.get(fd)
    return e is not None and e.kind == "unix" and e.peer_inode is not None and e.peer_inode in own


def _waits_on_itself(t: ThreadSample, ends: Dict[int, FdEnd], own: FrozenSet[int]) -> bool:
    """One thread at one sample: only its own process (or a timer) can end what it waits on.
    A thread caught running is judged by the process's work, not here."""
    if t.state == "R" or t.syscall == "running":
        return True
    if t.state != "S":
        return False
    if t.syscall in _SLEEPS:
        return True
    if t.syscall == "futex":
        return t.futex_op is not None and bool(t.futex_op & _FUTEX_PRIVATE)
    if t.syscall in _EPOLL:
        if t.watched_fds is None or t.watched_more:
            return False
        return all(_own_end(fd, ends, own) for fd in t.watched_fds)
    return False


_JOIN: WaitKind = "join"


def _waiter(bundle: Bundle, t: ThreadSample) -> bool:
    """A thread whose wait no timer of its own ends: an untimed wait on a lock, event or queue
    of its process, or an event loop (the coroutine it runs awaits is on no stack). A join
    is none: it waits for a live thread of its own to end - the one that wakes, for all the
    capture shows (``t.start(); t.join()`` on a polling loop)."""
    if t.state != "S":
        return False
    if t.syscall != "futex":
        return t.syscall in _EPOLL
    if t.wait_timed is True or t.futex_op is None or not t.futex_op & _FUTEX_PRIVATE:
        return False
    return thread_wait(bundle, t).kind != _JOIN


def holds_a_waiter(bundle: Bundle, p: ProcSignals) -> bool:
    """In every sample some thread waits on something a timer does not end. With none - every
    thread sleeps on its own timer, or joins one that does - nothing waits on its own code:
    each wake is the work (a poll of a file, a clock, a flag), and what it checks diag cannot
    see."""
    series = _series(bundle, p)
    return bool(series) and all(any(_waiter(bundle, t) for t in ps.threads) for ps in series)


def _closed_sample(ps: ProcessSample) -> Optional[int]:
    """The fds its loop watches when nothing outside can wake the process at this sample,
    else None."""
    if ps.listen_ports or ps.served:
        return None
    main = next((t for t in ps.threads if t.tid == ps.pid), None)
    if main is None or main.signals_caught is None:
        return None
    if any(sig not in _NOT_A_DOOR for sig in main.signals_caught):
        return None
    ends = {e.fd: e for e in ps.fd_ends}
    own = frozenset(e.inode for e in ps.fd_ends)
    if not all(_waits_on_itself(t, ends, own) for t in ps.threads):
        return None
    # No connection anyone could write to: its only sockets are wake-up pairs it holds both
    # ends of (a client idle between two calls to a server holds one that is not).
    paired = [e for e in ps.fd_ends if e.kind == "unix" and e.peer_inode in own]
    if ps.socket_fds is None or ps.socket_fds != len(paired):
        return None
    return len(main.watched_fds or ())


def _wakes(series: Sequence[ProcessSample]) -> int:
    first = {t.tid: t.voluntary_ctxt_switches for t in series[0].threads}
    total = 0
    for t in series[-1].threads:
        a, b = first.get(t.tid), t.voluntary_ctxt_switches
        if a is not None and b is not None and b > a:
            total += b - a
    return total


def wakes_only_itself(bundle: Bundle, p: ProcSignals) -> Optional[Tuple[int, int]]:
    """(wakes, fds its loop watches) when, in every sample, only ``p`` itself can wake ``p``
    and it woke ``MIN_WAKES`` times or more; None otherwise."""
    series = _series(bundle, p)
    if len(series) < 2:
        return None
    watched = [_closed_sample(ps) for ps in series]
    if any(w is None for w in watched):
        return None
    wakes = _wakes(series)
    if wakes < MIN_WAKES:
        return None
    return wakes, max(w or 0 for w in watched)


def self_wake(
    bundle: Bundle, alive: Sequence[ProcSignals], logs: Sequence[LogGrowth]
) -> Optional[SelfWake]:
    """The job's one picture of a process that wakes only itself to say it lives: every live
    process of the job is closed to the outside, and the logs they write grew with liveness
    lines only. None otherwise."""
    if not alive:
        return None
    keys = {p.key for p in alive}
    written = [lg for lg in logs if lg.grew and lg.writers & keys]
    if not written or not all(lg.heartbeat for lg in written):
        return None
    if any(_POLLS_FOR.search(line) for lg in written for line in lg.new_lines):
        return None  # its timer checks for something diag cannot see: a poll, not liveness
    found: Optional[SelfWake] = None
    waited = False
    for p in alive:
        closed = wakes_only_itself(bundle, p)
        if closed is None:
            return None
        waited = waited or holds_a_waiter(bundle, p)
        mine = [lg for lg in written if p.key in lg.writers]
        if found is None and mine:
            lines = [line for line in mine[0].new_lines if line.strip()]
            found = SelfWake(p, closed[0], closed[1], mine[0], lines[-1] if lines else "")
    return found if waited else None
