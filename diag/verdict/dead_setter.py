"""A thread that spins on one line of the job's own code while the thread that was to end the
spin is dead: ``while not self.ready: pass`` after its setter died.

A pure-Python busy-wait shows no poll frame - no ``exists``, no ``Event.is_set``, only the
job's own line - so it reads "slow: CPU-bound ... one long call: same stack in every sample -
wait, don't kill". What gives it away is its log: CPython's ``threading.excepthook`` writes
"Exception in thread prefetch:" and a traceback when a thread dies, and no live thread of the
process carries that name any more (``pileup.dead_thread``, the request pile-up cause's
reading). A spin that never leaves one line beside a setter that died will not end; one
beside a live setter (slow to load) does. It cannot be told from a long C call on that line
that has nothing to do with the dead thread, so the sentence says what would tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from diag.model import Bundle, ProcessSample, ThreadSample, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.pileup import dead_thread
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of, thread_wait

MIN_SAMPLES = 3  # the spin is seen on its line at every one of them
MIN_SHARE = 0.5  # of a core, in every interval


@dataclass(frozen=True)
class SpinOnDead:
    """A thread spinning on one line, and the thread its process's log says died."""

    proc: ProcSignals
    thread: str
    frame: str  # "wait_until_ready (service.py:34)"
    dead: str  # the dead thread's name
    line: str  # its death line, with the exception


def _series(bundle: Bundle, p: ProcSignals) -> List[ProcessSample]:
    host, pid = p.key
    return [ps for ps in process_samples(bundle, host, pid) if ps.state not in ("Z", "X")]


class _Live:
    """The names of a sample's threads, read only when a log's death line asks (16,384 ranks
    spinning in a collective, 300 threads each, mostly have none)."""

    def __init__(self, threads: Tuple[ThreadSample, ...]) -> None:
        self._threads = threads
        self._names: Optional[Set[str]] = None

    def __contains__(self, name: object) -> bool:
        if self._names is None:
            self._names = {t.py_thread_name or t.name for t in self._threads}
        return name in self._names


def spin_on_dead(bundle: Bundle, p: ProcSignals, clk: int = 100) -> Optional[SpinOnDead]:
    """``p``'s main thread ran the same stack (the same line) at every sample, busy in every
    interval, while its log says one of its threads died; None otherwise."""
    series = _series(bundle, p)
    if len(series) < MIN_SAMPLES or p.stopped:
        return None
    mains = [main_thread(ps) for ps in series]
    if any(t is None or t.stack_id is None for t in mains):
        return None
    ids = {t.stack_id for t in mains if t is not None}
    if len(ids) != 1:
        return None
    for (a, ta), (b, tb) in zip(zip(series, mains), zip(series[1:], mains[1:])):
        assert ta is not None and tb is not None
        dt = (b.t_s or 0.0) - (a.t_s or 0.0)
        ticks = (tb.utime_ticks + tb.stime_ticks) - (ta.utime_ticks + ta.stime_ticks)
        if dt <= 0 or ticks / clk / dt < MIN_SHARE:
            return None
    # Only a death of its own (``death_owner``): a busy process beside another's dead thread
    # in a log they share (``python train.py 2> job.log``) is a long call more likely than a
    # spin on that thread.
    name, line = dead_thread(bundle, p, _Live(series[-1].threads), alone=True)
    if not name:
        return None
    last = mains[-1]
    assert last is not None
    frames = frames_of(bundle, last.stack_id)
    if not frames:
        return None
    top = frames[0]
    where = f"{top.name} ({top.filename.rsplit('/', 1)[-1]}:{top.line})"
    return SpinOnDead(p, last.py_thread_name or last.name, where, name, line)


# What a thread parks on when it waits for another thread to set or release something: an
# Event or Condition, a lock. A queue's ``get`` is left out: a consumer parked there is how an
# idle worker waits for its next item from anyone (a socket thread, a request).
_SETTER_WAITS = frozenset({"condition", "lock"})


@dataclass(frozen=True)
class BlockOnDead:
    """A thread parked untimed in the job's own code on what another thread sets, and the
    thread its process's log says died."""

    proc: ProcSignals
    thread: str
    frame: str  # "Net.training_step (train.py:22)": the job's frame that waits
    wait: str  # "Event.wait"
    dead: str
    line: str


def _parked(
    bundle: Bundle, by_tid: List[Dict[int, ThreadSample]], tid: int
) -> Optional[ThreadSample]:
    """The thread ``tid``'s last sample when it sat untimed on one stack in the job's own code
    at every sample, its CPU ticks unchanged; None otherwise. ``by_tid``: each sample's
    threads by tid."""
    seen = [threads.get(tid) for threads in by_tid]
    if any(t is None or t.stack_id is None for t in seen):
        return None
    if len({t.stack_id for t in seen if t is not None}) != 1:
        return None
    ticks = {t.utime_ticks + t.stime_ticks for t in seen if t is not None}
    last = seen[-1]
    assert last is not None
    w = thread_wait(bundle, last)
    if len(ticks) != 1 or w.kind not in _SETTER_WAITS or w.timed is not False or not w.caller:
        return None
    return last


def block_on_dead(bundle: Bundle, p: ProcSignals) -> Optional[BlockOnDead]:
    """A thread of ``p`` parked untimed on an Event, Condition or lock in the job's own code,
    the same stack and no CPU at every sample, while its log says one of its threads died
    ("Exception in thread loader:") and no live thread has that name: the setter is gone.
    None otherwise."""
    series = _series(bundle, p)
    if len(series) < MIN_SAMPLES or p.stopped:
        return None
    # The death line first: most processes have none, and looking for a parked thread walks
    # every thread of every sample (at 4,096 ranks x 300 threads it was 20 s of a verdict).
    # Only a death of its own, as for a spin: an idle service's main thread waits on its stop
    # Event (set by its SIGTERM handler) beside a helper whose thread died in the log they
    # share - the death line names no process; only its traceback's files can say whose.
    name, line = dead_thread(bundle, p, _Live(series[-1].threads), alone=True)
    if not name:
        return None
    by_tid = [{t.tid: t for t in ps.threads} for ps in series]
    for t in series[-1].threads:
        last = _parked(bundle, by_tid, t.tid)
        if last is None:
            continue
        w = thread_wait(bundle, last)
        frames = frames_of(bundle, last.stack_id)
        own = next((f for f in frames if f.name == w.caller), None)
        where = w.caller
        if own is not None:
            where = f"{own.name} ({own.filename.rsplit('/', 1)[-1]}:{own.line})"
        return BlockOnDead(p, last.py_thread_name or last.name, where, w.label, name, line)
    return None
