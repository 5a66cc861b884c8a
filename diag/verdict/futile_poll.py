"""Timer wakes that cannot end the wait: a thread polls on a timer, but what it waits for needs
something only it could do - and between its wakes it does nothing else.

A timer is a door when whoever it wakes may act on the world: retry a host, find a file, take
the next batch. Two pictures where it may not, both as for a put on a full queue nobody drains
(``self_wait.undrained_put``): the thread woke ``MIN_WAKES`` times or more during the capture,
back each time in the same sleep with the same stack, read and wrote nothing, and the other
side never moved:

- **pipe**: a process blocks writing to a full pipe (its stdout, ``stdout=PIPE``) whose read
  end is held by a process that polls on a timer (``while proc.poll() is None: sleep()``) and
  never reads it. The writer waits for the reader to read, the reader for the writer to exit.
- **lock**: threads block untimed on one lock of their process, and every other thread of it
  polls on a timer (``while any(t.is_alive() ...): sleep()``, ``not f.done()``): no thread that
  runs could release the lock. Either a poller holds it while it waits for the very threads
  that need it, or its holder is gone; its wakes end neither.

A poll that does anything between its sleeps - reads, writes, a step of its loop caught on
another line, a longer sleep caught once (a back-off: ``lock_held_in_backoff``) - is not
futile, nor is a process with a listening port (a request may act).

How long: the lock's waiters were off the CPU since they blocked (``ThreadSample.off_cpu_s``,
read for threads that share one futex word), so the longest of them says how long the lock has
been held at least - hours of a hang told from a capture of seconds (issue #33).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Sequence, Tuple

from diag.frames import is_library
from diag.model import Bundle, ProcessSample, ThreadSample, WaitGraph
from diag.verdict.features import ProcSignals
from diag.verdict.graph_nodes import node_key
from diag.verdict.proc_classes import unless_found_nothing
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of, thread_wait
from diag.verdict.waits import SLEEP

MIN_WAKES = 2  # the thread woke at least this often during the capture: it cycled
# A lock held this long, through this many of its poller's timer periods, is stuck by time
# alone: whatever the poller waits for had hundreds of chances to end and did not.
STUCK_HELD_S = 10.0
STUCK_PERIODS = 20
LOCK_KIND = "lock"  # ``thread_wait``'s kind for a plain lock's acquire
FutileKind = Literal["pipe", "lock"]


@dataclass(frozen=True)
class Poller:
    """A thread that polls on a timer and did nothing else."""

    thread: str  # its name
    wakes: int  # voluntary context switches during the capture
    where: str  # the frame it sleeps in, with its caller
    period_s: Optional[float] = None  # its sleep's timeout, as the kernel read it


@dataclass(frozen=True)
class FutilePoll:
    """A wait that a polling thread's timer cannot end (see the module docstring)."""

    kind: FutileKind
    poller: ProcSignals  # the process that polls
    polls: Tuple[Poller, ...]
    waiters: Tuple[ProcSignals, ...]  # pipe: the blocked writers; lock: the process itself
    blocked_threads: int = 0  # lock: how many threads wait on it
    lock_in: str = ""  # lock: the frame its waiters block in
    # lock: its longest waiter's time off the CPU at the last sample (the kernel's
    # ``off_cpu_s``): the lock has been held at least that long. None when not read.
    held_s: Optional[float] = None
    held_since_s: Optional[float] = None  # epoch seconds
    # lock: the thread parked untimed on a condition in the job's code - the lock's likely
    # holder - as "thread `producer` in `Condition.wait` ← `producer`"; "" when none.
    holder: str = ""


def stuck_by_age(f: FutilePoll) -> bool:
    """The lock's age says stuck (``STUCK_HELD_S``, ``STUCK_PERIODS``), beside the wakes."""
    period = f.polls[0].period_s if f.polls else None
    if f.held_s is None or f.held_s < STUCK_HELD_S:
        return False
    return period is None or period <= 0 or f.held_s >= STUCK_PERIODS * period


def alive_series(bundle: Bundle, p: ProcSignals) -> List[ProcessSample]:
    host, pid = p.key
    return [q for q in process_samples(bundle, host, pid) if q.state not in ("Z", "X")]


def threads_by_tid(series: Sequence[ProcessSample]) -> Dict[int, List[ThreadSample]]:
    """Each thread's samples, for the threads seen in every sample of the series."""
    out: Dict[int, List[ThreadSample]] = {}
    for ps in series:
        for t in ps.threads:
            out.setdefault(t.tid, []).append(t)
    return {tid: ts for tid, ts in out.items() if len(ts) == len(series)}


def timer_poller(bundle: Bundle, ts: Sequence[ThreadSample]) -> Optional[Poller]:
    """The thread sleeps on a short timer in every sample, one stack throughout, and woke
    ``MIN_WAKES`` times or more; None otherwise."""
    if any(t.stack_id is None or t.stack_id != ts[0].stack_id for t in ts):
        return None
    waits = [thread_wait(bundle, t) for t in ts]
    if not all(w.kind == SLEEP or (w.timed is True and w.kind is not None) for w in waits):
        return None
    wakes = (ts[-1].voluntary_ctxt_switches or 0) - (ts[0].voluntary_ctxt_switches or 0)
    if wakes < MIN_WAKES:
        return None  # one long sleep caught more than once: a back-off, it ends by itself
    name = ts[-1].py_thread_name or ts[-1].name or str(ts[-1].tid)
    w = waits[-1]
    where = f"`{w.label}`" + (f" ← `{w.caller}`" if w.caller else "")
    return Poller(name, wakes, where, ts[-1].timeout_s)


def untimed_lock(t: ThreadSample) -> bool:
    return (
        t.syscall == "futex"
        and t.wait_timed is False
        and t.futex_addr is not None
        and t.futex_op is not None
        and bool(t.futex_op & 0x80)  # private: a lock of this process
    )


def moved_nothing(p: ProcSignals) -> bool:
    """It read, wrote and served nothing, and opened no door of its own (a port)."""
    return (
        p.read_delta_bytes == 0
        and p.write_delta_bytes == 0
        and p.served_delta_bytes == 0
        and p.short_requests is None
        and not p.listen_ports
    )


def _pollers_of(bundle: Bundle, p: ProcSignals, skip: Sequence[int] = ()) -> List[Poller]:
    """Every thread of ``p`` not in ``skip`` polls futilely, and there is one at least."""
    series = alive_series(bundle, p)
    if len(series) < 2:
        return []
    threads = threads_by_tid(series)
    if set(threads) != {t.tid for t in series[-1].threads}:
        return []  # threads came or went: something ran
    out: List[Poller] = []
    for tid, ts in threads.items():
        if tid in skip:
            continue
        found = timer_poller(bundle, ts)
        if found is None:
            return []
        out.append(found)
    return out


def _parked(bundle: Bundle, ts: Sequence[ThreadSample]) -> bool:
    """Parked untimed on a condition in every sample, one stack, in the job's own code."""
    return (
        bool(ts)
        and all(
            t.wait_timed is not True
            and t.stack_id is not None
            and t.stack_id == ts[0].stack_id
            and thread_wait(bundle, t).kind == "condition"
            for t in ts
        )
        and not all(is_library(f) for f in frames_of(bundle, ts[0].stack_id))
    )


def lock_polled(bundle: Bundle, p: ProcSignals) -> Optional[FutilePoll]:
    """Threads of ``p`` block untimed on one private lock in every sample, with unchanged
    stacks, and every other thread of it polls futilely."""
    if not moved_nothing(p):
        return None
    return unless_found_nothing(
        bundle, "lock_polled", p.series_class, lambda: _lock_polled(bundle, p)
    )


def lock_groups(bundle: Bundle, threads: Dict[int, List[ThreadSample]]) -> Dict[str, List[int]]:
    """Threads blocked untimed on one private lock in every sample, by the lock's address."""
    out: Dict[str, List[int]] = {}
    for tid, ts in threads.items():
        if all(
            untimed_lock(t)
            and t.stack_id == ts[0].stack_id
            and thread_wait(bundle, t).kind == LOCK_KIND
            for t in ts
        ):
            addrs = {t.futex_addr for t in ts}
            if len(addrs) == 1:
                out.setdefault(str(next(iter(addrs))), []).append(tid)
    return out


def _lock_polled(bundle: Bundle, p: ProcSignals) -> Optional[FutilePoll]:
    series = alive_series(bundle, p)
    if len(series) < 2:
        return None
    threads = threads_by_tid(series)
    # A plain lock's acquire (``with lock:``), not an Event, a Queue or a join: a stop event a
    # signal handler sets, a queue a request fills, are doors of their own.
    blocked = lock_groups(bundle, threads)
    if not blocked:
        return None
    tids = max(blocked.values(), key=len)
    others = [tid for tids_ in blocked.values() for tid in tids_]
    # The lock's likely holder (``lock_holder``): one thread parked untimed through the
    # series in the job's own code on a condition - a producer inside ``with lock:`` waiting
    # in ``Queue.put`` for room only a consumer it blocks would make. Only a thread of the
    # process could notify it, and the others wait on the lock or only poll.
    parked = [tid for tid, ts in threads.items() if tid not in others and _parked(bundle, ts)]
    if len(parked) > 1:
        return None
    polls = _pollers_of(bundle, p, skip=others + parked)
    if not polls or len(blocked) > 1:
        return None
    first = threads[tids[0]][-1]
    w = thread_wait(bundle, first)
    lock_in = f"`{w.caller or w.label}`"
    # A waiter blocked while the lock was held and has not run since (a release wakes the
    # first waiter in line): the longest wait is a floor on how long the lock is held.
    ages = [threads[tid][-1].off_cpu_s for tid in tids]
    held = max((a for a in ages if a is not None), default=None)
    at = series[-1].t_s
    since = round(at - held, 3) if held is not None and at > 0 else None
    holder = ""
    if parked:
        t = threads[parked[0]][-1]
        hw = thread_wait(bundle, t)
        name = t.py_thread_name or t.name or str(t.tid)
        holder = f"thread `{name}` in `{hw.label}`" + (f" ← `{hw.caller}`" if hw.caller else "")
    return FutilePoll("lock", p, tuple(polls), (p,), len(tids), lock_in, held, since, holder)


def pipe_polled(
    bundle: Bundle, writers: Sequence[ProcSignals], procs: Sequence[ProcSignals],
    graph: Optional[WaitGraph],
) -> Optional[FutilePoll]:  # fmt: skip
    """Writers block on a full pipe whose read end (the graph's pipe edge) a process holds
    that polls futilely and never read."""
    if graph is None or not writers:
        return None
    by_key = {node_key(q): q for q in procs if not q.dead}
    for w in writers:
        if w.write_delta_bytes:
            continue  # it wrote during the capture: the pipe drains
        ends = [e.dst for e in graph.edges if e.src == node_key(w) and e.kind == "pipe"]
        readers = [by_key[k] for k in ends if k in by_key and by_key[k] is not w]
        if len(readers) != 1 or not moved_nothing(readers[0]):
            continue
        polls = _pollers_of(bundle, readers[0])
        if polls:
            stuck = tuple(q for q in writers if not q.write_delta_bytes)
            return FutilePoll("pipe", readers[0], tuple(polls), stuck)
    return None
