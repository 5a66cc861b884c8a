"""Who holds a lock its waiters block on, when no thread runs: the lock stayed held through the
capture, so its holder is a thread that does not run either - or one that is gone.

A plain ``threading.Lock`` records no owner (an ``RLock`` does; a futex does not), and a
``with lock:`` leaves no frame of its own, so no stack says "I hold it". What the samples do
say: the lock was never released while they were taken, so it is held by a thread that was
parked, untimed, in every sample - in the job's own code, waiting to be handed something (an
event, a condition, another lock). A thread waiting in ``join`` waits for a thread to end, a
consumer on a queue's ``get`` waits for work, an idle pool worker (only library frames:
between two tasks) holds nothing a task took - none is such a candidate. With one candidate,
it is named as the likely holder, with what it waits for; a pool's worker thread inside a task
is as good a candidate as any thread. With none, no live thread is seen holding it: its holder
most likely died holding it, or returned without releasing it.

Pure: reads the bundle's samples (stacks, futex addresses) through ``thread_wait``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.frames import is_library
from diag.model import Bundle, ProcessSample, ThreadSample
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of, thread_wait

# Waits a holder sits in: an event or condition, another lock. Not a queue's get: a thread
# waiting there for work is the idle side of a queue (a consumer between two items).
_HANDOFF = frozenset({"condition", "lock", "blocked"})
MAX_CANDIDATES = 3


@dataclass(frozen=True)
class LockHolders:
    """A process's one lock that stayed held, its waiters, and the threads that may hold it."""

    lock_in: str  # the waiters' frame: "`lookup`"
    waiters: int
    candidates: Tuple[Tuple[str, str], ...]  # (thread name, "`Event.wait` ← `refresh_index`")


def _stable(seq: Sequence[ProcessSample]) -> Dict[int, ThreadSample]:
    """The threads of the last sample that kept one stack and one futex through the series."""
    keep = {t.tid: (t.stack_id, t.futex_addr) for t in seq[-1].threads}
    for ps in seq[:-1]:
        seen = {t.tid: (t.stack_id, t.futex_addr) for t in ps.threads}
        keep = {tid: v for tid, v in keep.items() if seen.get(tid) == v}
    return {t.tid: t for t in seq[-1].threads if t.tid in keep}


def _label(bundle: Bundle, t: ThreadSample) -> str:
    w = thread_wait(bundle, t)
    return f"`{w.label}`" + (f" ← `{w.caller}`" if w.caller else "")


def lock_holders(bundle: Bundle, p: ProcSignals) -> Optional[LockHolders]:
    """The one lock of ``p`` whose waiters blocked on it untimed through the capture, and the
    threads that may hold it (see the module docstring); None without such a lock."""
    host, pid = p.key
    seq = [ps for ps in process_samples(bundle, host, pid) if ps.status == "alive"]
    if len(seq) < 2:
        return None
    stable = _stable(seq)
    by_lock: Dict[str, List[ThreadSample]] = {}
    for t in stable.values():
        w = thread_wait(bundle, t)
        if t.futex_addr and w.kind in ("lock", "blocked") and w.timed is not True:
            by_lock.setdefault(t.futex_addr, []).append(t)
    if len(by_lock) != 1:
        return None  # none, or a cycle (lock_cycle names those)
    addr, waiters = next(iter(by_lock.items()))
    out: List[Tuple[str, str]] = []
    for t in stable.values():
        if t.futex_addr == addr or t.stack_id is None:
            continue
        w = thread_wait(bundle, t)
        if w.kind not in _HANDOFF or w.timed is True:
            continue
        if all(is_library(f) for f in frames_of(bundle, t.stack_id)):
            continue  # an idle pool worker, between tasks
        out.append((t.py_thread_name or t.name or str(t.tid), _label(bundle, t)))
    first = thread_wait(bundle, waiters[0])
    lock_in = f"`{first.caller or first.label}`"
    return LockHolders(lock_in, len(waiters), tuple(out[:MAX_CANDIDATES]))
