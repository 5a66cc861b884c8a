"""A thread that waits on itself: blocked taking a lock a frame lower on its own stack holds.

A signal handler, a finalizer (``__del__``), a GC callback or a logging handler runs *on top
of* whatever the thread was doing - in the same thread. If the code it interrupted held a
non-reentrant lock and the handler takes the same lock, the thread blocks on itself: no second
thread, no cycle between threads, nothing any other process can do. Worse, a periodic timer
keeps firing: Python runs the handler again inside the blocked ``acquire`` (lock waits are
interruptible on POSIX), which blocks again one level up, so the stack deepens by one set of
handler frames per firing. Read by CPU and kernel state alone it is a process asleep on a
futex that wakes on a timer - "idle", the costliest miss there is.

Recognised on one thread's stack (innermost first), as a pure function:

- **re-entered**: the function blocked taking the lock at the top also runs lower on the same
  stack, with a handler boundary between the two copies (a signal handler, ``__del__`` or a
  weakref/``finalize`` callback, a GC callback, logging's ``Handler.handle``) - the lower copy
  holds the lock the upper one waits for;
- **finalizer of the holder's class**: ``C.__del__`` blocked at the top while a method of the
  same class ``C`` runs lower on the stack (the object died inside a method holding its lock);
- **deepening**: across samples the stack only grows on top, and what was added repeats the
  blocked function - a handler re-entered each time the timer fires.

A healthy ``RLock`` re-entered by design never blocks its owner, and a recursive function that
computes is not blocked on a lock at its top: neither is flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Sequence, Tuple

from diag.frames import is_library
from diag.frameworks import union
from diag.model import Bundle, Frame, ProcessSample, ThreadSample, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.thread_wait import ThreadWait, frames_of, thread_wait
from diag.verdict.waits import SLEEP, short_name

Boundary = Literal["signal handler", "finalizer", "GC callback", "logging handler", "re-entered"]

# Frames that only take a lock: skipped to find the function taking it.
_LOCK_TAKERS = union.LOCK_TAKE_FRAMES
_RLOCK_FILES = union.RLOCK_FILES
_SIGNAL_NAME = re.compile(
    r"(^|_)(sig|signal|signals|alarm|sigalrm|sigterm|sigint|sighup|sigusr\d?|on_term|on_int"
    r"|handler|handle_signal|on_signal|timeout|watchdog_fired)($|_)",
    re.IGNORECASE,
)
_FINALIZERS = union.FINALIZER_FRAMES
_GC_NAME = re.compile(r"(^|_)gc(_|$)|gc_callback|on_gc|collect_callback", re.IGNORECASE)
_LOG_HANDLERS = union.LOG_HANDLER_FRAMES
MAX_FRAMES = 4096  # a stack longer than this is read up to here (a hostile or runaway stack)


@dataclass(frozen=True)
class SelfWait:
    """One thread blocked on itself, the two frames that name it, and how it got there."""

    key: Tuple[str, int]  # (host, pid)
    tid: int
    thread: str
    blocked: Frame  # the frame blocked taking the lock (the upper one)
    holder: Frame  # the lower frame that holds it
    boundary: Frame  # the handler / finalizer frame between them
    kind: Boundary
    copies: int = 2  # how many times the blocked function is on the stack
    grew_frames: int = 0  # frames the stack gained over the capture (a timer re-entering)
    # The holder is inferred: a finalizer of another class blocked on top of it while no other
    # thread of the process ran during the capture, so no other thread can hold the lock.
    inferred: bool = False


def _is_lock_frame(f: Frame) -> bool:
    return union.matches(_LOCK_TAKERS, short_name(f.name), f.filename)


def _same(a: Frame, b: Frame) -> bool:
    return a.name == b.name and a.filename == b.filename


def _boundary(between: Sequence[Frame], blocked: Frame) -> Optional[Tuple[Frame, Boundary]]:
    """The handler boundary among the frames between the two copies (innermost first)."""
    for f in between:
        name = short_name(f.name)
        if name == "__del__" or union.matches(_FINALIZERS, name, f.filename):
            return f, "finalizer"
    for f in between:
        if _GC_NAME.search(short_name(f.name)):
            return f, "GC callback"
    for f in between:
        if _SIGNAL_NAME.search(short_name(f.name)) and not _same(f, blocked):
            return f, "signal handler"
    for f in between:
        if union.matches(_LOG_HANDLERS, short_name(f.name), f.filename):
            return f, "logging handler"
    return None


def _top(frames: Sequence[Frame]) -> int:
    """Index of the function taking the lock: the first frame below the lock primitives."""
    i = 0
    while i < len(frames) and _is_lock_frame(frames[i]):
        i += 1
    return i


def stack_self_wait(
    frames: Sequence[Frame],
) -> Optional[Tuple[Frame, Frame, Frame, Boundary, int]]:
    """(blocked, holder, boundary, kind, copies) when a stack blocked on a lock at its top shows
    the lock taken again across a handler boundary; None otherwise. The caller has checked
    that the thread is blocked on a lock (kernel futex wait) in this sample."""
    frames = frames[:MAX_FRAMES]
    a = _top(frames)
    if a >= len(frames):
        return None
    blocked = frames[a]
    if blocked.filename.endswith(_RLOCK_FILES):
        return None  # logging's handler and module locks are RLocks: their owner re-enters
    lower = [j for j in range(a + 1, len(frames)) if _same(frames[j], blocked)]
    if lower:
        j = lower[0]
        found = _boundary(frames[a + 1 : j], blocked)
        if found is not None:  # the outermost copy took the lock first; it holds it
            return blocked, frames[lower[-1]], found[0], found[1], 1 + len(lower)
    if short_name(blocked.name) == "__del__" and "." in blocked.name:
        cls = blocked.name.rsplit(".", 1)[0]
        for f in frames[a + 1 :]:
            if f.name.startswith(cls + ".") and f.filename == blocked.filename:
                return blocked, f, blocked, "finalizer", 1
    return None


def _deepened(stacks: Sequence[Tuple[Frame, ...]]) -> int:
    """Frames added on top over the series when every later stack is an earlier one with
    frames pushed on it (0 when any sample shows another shape)."""
    for a, b in zip(stacks, stacks[1:]):
        if len(b) < len(a) or b[len(b) - len(a) :] != a:
            return 0
    return len(stacks[-1]) - len(stacks[0])


def _blocked_on_lock(t: ThreadSample) -> bool:
    futex = t.syscall == "futex" or (t.wchan or "").startswith("futex_")
    return t.state == "S" and futex and t.wait_timed is not True


FINALIZER_DEPTH = 16  # frames above which a finalizer is looked for, from the blocked one


def _finalizer_at(frames: Sequence[Frame], a: int) -> Optional[int]:
    """Index of the innermost ``__del__`` at or just below the blocked frame ``a``."""
    for d in range(a, min(len(frames), a + FINALIZER_DEPTH)):
        if short_name(frames[d].name) == "__del__":
            return d
    return None


def _finalizer_alone(
    p: ProcSignals, tid: int, name: str, frames: Sequence[Frame]
) -> Optional[SelfWait]:
    """A lock taken from a ``__del__`` while no other thread of its process ran: the lock is
    held by a frame of this very stack - the one the finalizer ran on top of."""
    a = _top(frames)
    d = _finalizer_at(frames, a)
    if d is None or d + 1 >= len(frames):
        return None
    holder = next((f for f in frames[d + 1 :] if not is_library(f)), frames[d + 1])
    return SelfWait(p.key, tid, name, frames[a], holder, frames[d], "finalizer", 1, 0, True)


def _thread_self_wait(
    bundle: Bundle, p: ProcSignals, series: Sequence[ThreadSample], others_still: bool = False
) -> Optional[SelfWait]:
    if len(series) < 2 or not all(_blocked_on_lock(t) for t in series):
        return None
    stacks = [frames_of(bundle, t.stack_id) for t in series]
    grew = _deepened(stacks)
    if grew == 0 and any(s != stacks[0] for s in stacks):
        return None  # it moved: not stuck
    found = stack_self_wait(stacks[-1])
    last = series[-1]
    name = last.py_thread_name or last.name or str(last.tid)
    if found is not None:
        blocked, holder, boundary, kind, copies = found
        return SelfWait(p.key, last.tid, name, blocked, holder, boundary, kind, copies, grew)
    if grew == 0 and others_still:
        alone = _finalizer_alone(p, last.tid, name, stacks[-1][:MAX_FRAMES])
        if alone is not None:
            return alone
    top = stacks[-1][:MAX_FRAMES]
    a = _top(top)
    if grew <= 0 or a >= len(top) or top[a].filename.endswith(_RLOCK_FILES):
        return None
    # Only the growth shows it: what was pushed on top holds another copy of the blocked
    # function, and the outermost pushed frame is the handler's entry, whatever its name.
    at = [j for j in range(len(top)) if _same(top[j], top[a])]
    if len(at) < 2 or at[0] >= grew:
        return None
    entry = top[min(grew, len(top)) - 1]
    return SelfWait(p.key, last.tid, name, top[a], top[at[-1]], entry, "re-entered", len(at), grew)


def _suspicious(frames: Sequence[Frame]) -> bool:
    """Worth a closer look: the function at the top runs twice or more on the stack, or is a
    finalizer - the only shapes ``_thread_self_wait`` can confirm."""
    frames = frames[:MAX_FRAMES]
    a = _top(frames)
    if a >= len(frames):
        return False
    if _finalizer_at(frames, a) is not None:
        return True
    return any(_same(f, frames[a]) for f in frames[a + 1 :])


def _others_still(bundle: Bundle, key: Tuple[str, int], tid: int) -> bool:
    """No other thread of the process used CPU or changed its stack over the capture, and no
    other Python thread sits blocked on a lock (it could be the holder, in a cycle)."""
    seen: Dict[int, Tuple[int, Optional[str]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            if (ps.host, ps.pid) != key or ps.status != "alive":
                continue
            for t in ps.threads:
                if t.tid == tid:
                    continue
                if t.stack_id is not None and _blocked_on_lock(t):
                    return False
                now = (t.utime_ticks + t.stime_ticks, t.stack_id)
                if seen.setdefault(t.tid, now) != now:
                    return False
    return True


def self_waits(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[SelfWait]:
    """Threads blocked on themselves in every sample (two at least), one per process at most.

    Cheap at 4,096 ranks: only threads blocked on a lock in the last sample whose stack has a
    suspicious shape (judged once per distinct stack) are followed back through the samples."""
    if len(bundle.samples) < 2:
        return []
    wanted = {p.key: p for p in procs if not p.dead}
    shape: Dict[str, bool] = {}
    candidates: Dict[Tuple[str, int], List[int]] = {}
    for ps in bundle.samples[-1].processes:
        key = (ps.host, ps.pid)
        if key not in wanted or ps.status != "alive":
            continue
        for t in ps.threads:
            if t.stack_id is None or t.state != "S" or not _blocked_on_lock(t):
                continue
            hit = shape.get(t.stack_id)
            if hit is None:
                hit = shape[t.stack_id] = _suspicious(frames_of(bundle, t.stack_id))
            if hit:
                candidates.setdefault(key, []).append(t.tid)
    out: List[SelfWait] = []
    for key, tids in candidates.items():
        series: Dict[int, List[ThreadSample]] = {tid: [] for tid in tids}
        for sample in bundle.samples:
            for ps in sample.processes:
                if (ps.host, ps.pid) == key and ps.status == "alive":
                    for t in ps.threads:
                        if t.tid in series and t.stack_id is not None:
                            series[t.tid].append(t)
        for tid in tids:
            still = _others_still(bundle, key, tid)
            found = _thread_self_wait(bundle, wanted[key], series[tid], still)
            if found is not None:
                out.append(found)
                break
    return out


_REMEDY: Dict[Boundary, str] = {
    "signal handler": (
        "never take that lock (nor log) in a signal handler: set a flag and do the work in "
        "the main loop, or make it an RLock"
    ),
    "finalizer": (
        "never take that lock in `__del__`: make it an RLock, or defer the cleanup "
        "(weakref.finalize, a queue drained outside the lock)"
    ),
    "GC callback": "never take that lock in a GC callback: make it an RLock or defer the work",
    "logging handler": (
        "a handler that logs re-enters itself: make its lock an RLock, or do not log from "
        "inside emit"
    ),
    "re-entered": (
        "a handler re-entered each time it fires takes a lock the code it interrupted holds: "
        "make it an RLock, or defer the work out of the handler"
    ),
}


def _frame_text(f: Frame) -> str:
    base = f.filename.rsplit("/", 1)[-1]
    return f"`{short_name(f.name) if len(f.name) > 80 else f.name}` ({base}:{f.line})"


def self_wait_text(w: SelfWait, who: str) -> str:
    """The sentence after "deadlocked: ": who, the two frames, how, the remedy."""
    if w.inferred:
        return (
            f"{who} (thread {w.thread}) waits on itself - it blocks taking a lock in "
            f"{_frame_text(w.blocked)}, called from the finalizer {_frame_text(w.boundary)}, "
            f"which ran on top of {_frame_text(w.holder)} lower on its own stack; no other "
            "thread of it ran during the capture, so that frame holds the lock. No other "
            f"thread can release it: kill it; the fix: {_REMEDY[w.kind]}"
        )
    via = "re-entered on top of it" if w.kind == "re-entered" else f"a {w.kind}"
    growth = (
        f"; its stack grew {w.grew_frames} frames during the capture - the handler fires again "
        "and blocks again"
        if w.grew_frames > 0
        else ""
    )
    copies = f" ({w.copies} copies stacked)" if w.copies > 2 else ""
    return (
        f"{who} (thread {w.thread}) waits on itself - it blocks taking a lock in "
        f"{_frame_text(w.blocked)} that {_frame_text(w.holder)}, lower on its own stack, "
        f"holds: {_frame_text(w.boundary)}, {via}, ran in between and took the same lock"
        f"{copies}{growth}. No other thread can release it: kill it; the fix: "
        f"{_REMEDY[w.kind]}"
    )


# --- a put on a full queue that no thread drains ----------------------------------------------
#
# ``queue.Queue(maxsize=N).put()`` blocks until a ``get`` frees a slot - and only a thread of
# the same process can call it. A main thread that fills the queue it was meant to drain itself
# (or whose consumer thread died) waits for ever, while a heartbeat thread keeps waking: read as
# "a timer may end the wait", that was "idle, healthy". A timer thread ends the put only if
# what it does on waking takes from the queue, and a ``get`` that frees a slot wakes the putter
# (``not_full.notify()``): so a putter that never woke while every other thread woke twice or
# more did not get its slot from any of them. A consumer that sleeps between items wakes
# twice in a capture only if it takes an item each time - and then the putter wakes too.

QUEUE_DEPTH = 4  # frames from the top a ``Queue.put`` is looked for (Condition.wait <- put)
MIN_CYCLES = 2  # wakes of each other thread during the capture: each cycled past the put


@dataclass(frozen=True)
class UndrainedPut:
    """A main thread blocked in ``Queue.put`` on a full queue no thread of its process drains."""

    key: Tuple[str, int]
    put: Frame  # the ``Queue.put`` frame
    caller: Frame  # the first frame below it outside the queue module: who puts
    others: Tuple[Tuple[str, int], ...]  # (thread name, wakes during the capture)


def _put_frames(frames: Sequence[Frame]) -> Optional[Tuple[Frame, Frame]]:
    for i, f in enumerate(frames[:QUEUE_DEPTH]):
        if short_name(f.name) == "put" and f.filename.endswith(union.QUEUE_FILES):
            below = [g for g in frames[i + 1 :] if not g.filename.endswith(union.QUEUE_FILES)]
            return f, below[0] if below else f
    return None


def _cycled_without_draining(
    bundle: Bundle, series: Sequence[ThreadSample]
) -> Optional[Tuple[str, int]]:
    """(name, wakes) of another thread that woke ``MIN_CYCLES`` times on a timer and never
    stood in a queue method; None when it could be the consumer (or a native thread that ran:
    it could call back in)."""
    first, last = series[0], series[-1]
    name = last.py_thread_name or last.name or str(last.tid)
    if all(t.stack_id is None for t in series):
        ran = (last.utime_ticks + last.stime_ticks) - (first.utime_ticks + first.stime_ticks)
        return (name, 0) if ran == 0 else None
    if any(
        f.filename.endswith(union.QUEUE_FILES)
        for t in series
        for f in frames_of(bundle, t.stack_id)
    ):
        return None
    timed = [t for t in series if t.stack_id is not None and _on_timer(thread_wait(bundle, t))]
    if not timed:
        return None  # never caught on its timer: it may be waiting for the queue another way
    if not all(_sleeps_in_entry(frames_of(bundle, t.stack_id)) for t in timed):
        return None  # asleep inside a step of its loop (a retry with backoff): a consumer?
    wakes = (last.voluntary_ctxt_switches or 0) - (first.voluntary_ctxt_switches or 0)
    return (name, wakes) if wakes >= MIN_CYCLES else None


def _on_timer(tw: ThreadWait) -> bool:
    return tw.kind == SLEEP or tw.timed is True


def _sleeps_in_entry(frames: Sequence[Frame]) -> bool:
    """The thread sleeps in its own entry function - a ticker's ``while True: sleep(); tick()``
    (the target, or a ``Thread.run`` override) - not in a call below it: a consumer that took
    an item and retries its upload with backoff sleeps in ``upload`` under its loop, and
    drains the queue once that returns. Only threading's frames wrap the entry (a wait's
    ``Event.wait`` above it, ``Thread.run``/``_bootstrap`` below)."""
    user = [i for i, f in enumerate(frames) if not f.filename.endswith(union.THREAD_FILES)]
    if not user:
        return False
    rest = frames[user[0] + 1 :]
    return bool(rest) and all(f.filename.endswith(union.THREAD_FILES) for f in rest)


def _main_series(alive: Sequence[ProcessSample]) -> List[ThreadSample]:
    """The main thread at each sample, when it is one thread blocked untimed on a futex with
    one stack throughout; else empty."""
    mains = [main_thread(ps) for ps in alive]
    last = mains[-1]
    if last is None or last.stack_id is None:
        return []
    out = [t for t in mains if t is not None and t.tid == last.tid]
    if len(out) != len(mains) or any(
        t.stack_id != last.stack_id or not _blocked_on_lock(t) for t in out
    ):
        return []
    return out


def _undrained_put(
    bundle: Bundle, p: ProcSignals, alive: Sequence[ProcessSample]
) -> Optional[UndrainedPut]:
    mains = _main_series(alive)
    found = _put_frames(frames_of(bundle, mains[-1].stack_id)) if mains else None
    if found is None or mains[0].voluntary_ctxt_switches is None:
        return None
    if mains[-1].voluntary_ctxt_switches != mains[0].voluntary_ctxt_switches:
        return None  # it woke: a get freed a slot, or something signalled it
    others: Dict[int, List[ThreadSample]] = {}
    for ps in alive:
        for t in ps.threads:
            if t.tid != mains[0].tid:
                others.setdefault(t.tid, []).append(t)
    cycled = []
    for series in others.values():
        if len(series) != len(alive):
            return None  # a thread came or went during the capture: it may be the consumer
        seen = _cycled_without_draining(bundle, series)
        if seen is None:
            return None
        if seen[1]:
            cycled.append(seen)
    if not cycled:
        return None  # no thread cycled: ``alone_on_own_queue`` and the lock rules read it
    return UndrainedPut(p.key, found[0], found[1], tuple(cycled))


def undrained_puts(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[UndrainedPut]:
    """Processes whose main thread waits in ``Queue.put`` in every sample (three at least),
    never woken, while each other thread cycled on its timer and none touched a queue; no
    listening port (a request handler could drain it). Cheap at 4,096 ranks: only a process
    whose main stack never changed and holds a ``Queue.put`` (judged once per stack) is
    followed through the samples."""
    if len(bundle.samples) < 3:
        return []
    shape: Dict[str, bool] = {}
    wanted: Dict[Tuple[str, int], ProcSignals] = {}
    for p in procs:
        sids = set(p.main_stack_ids)
        if p.dead or p.listen_ports or len(sids) != 1 or len(p.main_stack_ids) < 3:
            continue
        sid = next(iter(sids))
        if sid is None:
            continue
        if sid not in shape:
            shape[sid] = _put_frames(frames_of(bundle, sid)) is not None
        if shape[sid]:
            wanted[p.key] = p
    alive: Dict[Tuple[str, int], List[ProcessSample]] = {key: [] for key in wanted}
    for sample in bundle.samples:
        for ps in sample.processes:
            if (ps.host, ps.pid) in alive and ps.status == "alive":
                alive[(ps.host, ps.pid)].append(ps)
    found = (_undrained_put(bundle, wanted[key], alive[key]) for key in wanted)
    return [w for w in found if w is not None]


def undrained_put_text(w: UndrainedPut, who: str) -> str:
    """The sentence after "deadlocked: ": the put, the threads that cycled past it, the fix."""
    names = ", ".join(f"`{n}` ({k} wakes)" for n, k in w.others[:3])
    them = "its other thread" if len(w.others) == 1 else "its other threads"
    return (
        f"{who}'s main thread blocks in {_frame_text(w.put)} on a full bounded queue, called "
        f"from {_frame_text(w.caller)}, and no thread of it drains that queue: it never woke "
        f"during the capture while {them} {names} woke on a timer and took nothing from "
        "it. Only a `get` in the same process frees a slot: the thread "
        "meant to drain it is the one blocked putting (a producer that is also the consumer), "
        "or the consumer thread is gone (unless one of those threads takes from it only "
        "after a long step of its own, a retry with backoff). Nothing outside can end the "
        "wait: kill it; the fix: "
        "drain the queue from another thread, or `put(timeout=...)`/`put_nowait` and handle "
        "`queue.Full`"
    )
