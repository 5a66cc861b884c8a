"""Requests held open on purpose: a long poll, told from a wedged handler by the kernel's
timeouts.

A server whose clients' requests got no byte of answer through the capture, while nothing in
it moves, reads "a handler waits on something that never comes" - and that is what a long poll
looks like too: ``GET /events`` parked until the next event or its timeout. The difference is in
the handler threads' waits: a long poll waits *with a timeout* (``Condition.wait_for(...,
timeout=30)``), and the deadline probe reads how long until each wakes by itself
(``ThreadSample.wakes_in_s``); a wedged handler waits untimed (an event nobody sets, a lock
nobody releases). When every thread of the server waiting beside its accept loop is in a timed
wait that ends within ``MAX_POLL_S``, each request is answered by then at the latest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from diag.model import Bundle, ThreadSample, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import thread_wait
from diag.verdict.waits import RESULT, SLEEP

MAX_POLL_S = 600.0  # a long poll's timeout; a wait longer than this is no poll


@dataclass(frozen=True)
class LongPoll:
    """The server's handler threads waiting with a timeout, and when the last wakes."""

    threads: int
    wakes_in_s: float
    where: str  # "`Condition.wait_for` ← `Events.do_GET`"


def long_poll(bundle: Bundle, p: ProcSignals) -> Optional[LongPoll]:
    """The process's waiting threads beside its main one all wait with a timeout that ends
    within ``MAX_POLL_S``; None when one waits untimed or none is known to wake."""
    seen = process_samples(bundle, p.key[0], p.pid)
    last = seen[-1] if seen else None
    main = main_thread(last) if last is not None else None
    if last is None or main is None:
        return None
    waiting: List[ThreadSample] = []
    for t in last.threads:
        if t.tid == main.tid or t.stack_id is None:
            continue
        w = thread_wait(bundle, t)
        if w.kind is None or w.kind == SLEEP:
            continue  # running, or a sleeper of its own (a ticker): no handler
        if t.wait_timed is not True or t.wakes_in_s is None or t.wakes_in_s > MAX_POLL_S:
            return None  # a handler that waits untimed (or for longer) may never answer
        waiting.append(t)
    if not waiting:
        return None
    w = thread_wait(bundle, waiting[0])
    where = f"`{w.label}`" + (f" ← `{w.caller}`" if w.caller else "")
    return LongPoll(len(waiting), max(t.wakes_in_s or 0.0 for t in waiting), where)


@dataclass(frozen=True)
class SleepingWorkers:
    """Handler threads waiting for results that the process's only other busy threads - its
    pool's workers, each inside a task - will give when their timed sleeps end."""

    handlers: int  # threads waiting for a result (``Future.result``)
    sleepers: int
    wakes_in_s: float  # when the last sleeper wakes by itself
    where: str  # "`slow_backend` ← `_WorkItem.run`"


def workers_sleep(bundle: Bundle, p: ProcSignals) -> Optional[SleepingWorkers]:
    """Threads of ``p`` wait for results (a future, a pool's ``AsyncResult``) while every
    thread that is neither such a waiter, its accept loop, nor an idle worker waiting for a
    task sleeps on a timer that ends within ``MAX_POLL_S``: the results come when the sleeps
    end - a pool filled by slow calls (a backend called with a long sleep between retries, a
    rate limit), not a wedge. None when a thread runs, or waits on anything else (an untimed
    lock, a read from a backend that may never answer: then no timer says when)."""
    seen = process_samples(bundle, p.key[0], p.pid)
    last = seen[-1] if seen else None
    if last is None:
        return None
    handlers = 0
    sleepers: List[ThreadSample] = []
    for t in last.threads:
        kind = thread_wait(bundle, t).kind
        if kind == RESULT:
            handlers += 1
        elif kind == SLEEP:
            if t.wait_timed is not True or t.wakes_in_s is None or t.wakes_in_s > MAX_POLL_S:
                return None
            sleepers.append(t)
        elif kind not in _BESIDE:
            return None
    if not (handlers and sleepers):
        return None
    w = thread_wait(bundle, sleepers[0])
    where = f"`{w.label}`" + (f" ← `{w.caller}`" if w.caller else "")
    wakes = max(t.wakes_in_s or 0.0 for t in sleepers)
    return SleepingWorkers(handlers, len(sleepers), wakes, where)


# The waits that leave a server's results to its workers: its accept loop, and workers idle
# on their task queue.
_BESIDE = frozenset({"event-loop", "accept", "queue", "poll"})


def sleep_wakes_in(bundle: Bundle, p: ProcSignals) -> Optional[float]:
    """How long until ``p``'s main thread wakes from the timed sleep it was in at its last
    sample, by the kernel's reading of the sleep's deadline; None when it was in no sleep."""
    seen = process_samples(bundle, p.key[0], p.pid)
    main = main_thread(seen[-1]) if seen else None
    if main is None or thread_wait(bundle, main).kind != SLEEP:
        return None
    return main.wakes_in_s
