"""A request pile-up: threads that accumulate on one lock whose holder waits for something no
live thread will set - the signature of a wedged server, whatever its health endpoint says.

A threaded server whose handler takes a lock and, holding it, waits for an event (a model
warmed up, a queue filled) that a background thread was to set - a thread that died at
start-up with one logged traceback - answers nothing from then on: the first request holds
the lock for ever and every later request thread queues on it. Its accept loop and event
loop still run, its health endpoint may answer 200, and its log moves (the clients' timeouts,
the framework's cancellations), so "it keeps writing output" read it as progress. What gives
it away is the pile: more threads on the same futex at each sample, all in the same handler
frame, and one thread further down that same frame, parked untimed on another futex.

Pure: reads the bundle's samples (thread stacks, futex addresses) and the participants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Container, Dict, FrozenSet, List, Literal, Optional, Sequence, Set, Tuple

from diag.model import Bundle, Frame, ProcessSample, ThreadSample
from diag.verdict.death_owner import death_is_own
from diag.verdict.features import ProcSignals
from diag.verdict.proc_classes import unless_found_nothing
from diag.verdict.series_index import host_logs
from diag.verdict.thread_wait import frames_of, thread_wait
from diag.vocab import WaitKind

# Waits for another thread to hand something over: a lock, a condition, a queue.
_HANDOFF_KINDS: FrozenSet[WaitKind] = frozenset({"condition", "lock", "queue"})

PILE_MIN = 3  # threads on one lock in the last sample, at least
WaitsFor = Literal["event", "queue", "condition", "lock"]
# "Exception in thread warmup:" (CPython's threading.excepthook) names a thread that died.
_THREAD_DIED = re.compile(r"Exception in thread (?P<name>[^\s:(]+)")
MAX_QUOTE_CHARS = 160


@dataclass(frozen=True)
class PileUp:
    """One process's pile: its waiters' count per sample, their frame, the lock's likely
    holder and what it waits for, and the log line of a thread that died (when one did)."""

    key: Tuple[str, int]
    frame: str  # the waiters' frame: "Handler.do_GET"
    counts: Tuple[int, ...]  # threads on the lock, per sample
    holder_tid: int
    holder_name: str  # its Python name ("Thread-3 (process_request_thread)") or comm
    holder_wait: str  # the frame it waits in: "Event.wait"
    waits_for: WaitsFor
    serves: bool  # the process listens on a port: its threads are request threads
    dead_thread: str = ""  # the dead thread's name, from its traceback line
    dead_line: str = ""  # that line, quoted


def _series(bundle: Bundle) -> Dict[Tuple[str, int], List[ProcessSample]]:
    """Each live process's samples in order, indexed once (a merged bundle holds thousands of
    processes: one pass, not one per process)."""
    out: Dict[Tuple[str, int], List[ProcessSample]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            if ps.status == "alive":
                out.setdefault((ps.host, ps.pid), []).append(ps)
    return out


def _lock_waiters(bundle: Bundle, ps: ProcessSample) -> Dict[str, List[Tuple[ThreadSample, Frame]]]:
    """futex address -> the threads blocked on it untimed in a lock, with their top frame."""
    out: Dict[str, List[Tuple[ThreadSample, Frame]]] = {}
    for t in ps.threads:
        if not t.futex_addr or t.stack_id is None:
            continue
        tw = thread_wait(bundle, t)
        frames = frames_of(bundle, t.stack_id)
        if tw.kind == "lock" and tw.timed is not True and frames:
            out.setdefault(t.futex_addr, []).append((t, frames[0]))
    return out


def _waits_for(label: str) -> WaitsFor:
    if label.endswith("Event.wait"):
        return "event"
    if "Queue" in label or label.endswith(".get") or label.endswith(".put"):
        return "queue"
    return "condition" if "Condition" in label else "lock"


def _holder(
    bundle: Bundle, seq: Sequence[ProcessSample], frame: Frame, waiters: Set[int]
) -> Optional[Tuple[ThreadSample, str]]:
    """The thread inside the waiters' own frame, further down it (past the acquire), parked
    untimed on another futex in every sample: the lock's holder, and the frame it waits in."""
    stable: Dict[int, Tuple[Optional[str], Optional[str]]] = {
        t.tid: (t.stack_id, t.futex_addr) for t in seq[-1].threads
    }
    for ps in seq[:-1]:
        for t in ps.threads:
            if t.tid in stable and stable[t.tid] != (t.stack_id, t.futex_addr):
                del stable[t.tid]
    for t in seq[-1].threads:
        if t.tid in waiters or t.tid not in stable or t.stack_id is None:
            continue
        frames = frames_of(bundle, t.stack_id)
        inside = any(
            f.name == frame.name and f.filename == frame.filename and f.line != frame.line
            for f in frames[1:]
        )
        tw = thread_wait(bundle, t)
        if inside and tw.kind in _HANDOFF_KINDS and tw.timed is not True:
            return t, tw.label
    return None


def _nobody_works(bundle: Bundle, seq: Sequence[ProcessSample], waiters: Set[int]) -> bool:
    """No thread of the process that lives through the capture is caught working in more
    than half of the samples - none is busy on its way to setting what the holder waits for.
    A request thread on its way to the pile is one of it; a short-lived handler (a health
    check answered) or a client caught once between its calls is no such worker."""
    persistent = set.intersection(*({t.tid for t in ps.threads} for ps in seq)) - waiters
    working: Dict[int, int] = {}
    for ps in seq:
        for t in ps.threads:
            if t.tid in persistent and thread_wait(bundle, t).kind is None:
                working[t.tid] = working.get(t.tid, 0) + 1
    return all(n * 2 <= len(seq) for n in working.values())


def _dead_thread(
    bundle: Bundle, p: ProcSignals, live: Container[str], alone: bool = False
) -> Tuple[str, str]:
    """A thread the process's logs say died ("Exception in thread warmup:") that is not
    among its live threads: (its name, the line). ``alone``: only a death that is this
    process's - in a log it writes alone, or one it shares where it is the only writer
    running the job's files the traceback names (``death_owner``): CPython's death line
    names no process, so in a log several share it may be another's thread."""
    # The latest sample's logs first (a stable sort keeps each sample's own order).
    for _, log in sorted(host_logs(bundle, p.key[0]), key=lambda got: -got[0]):
        if p.pid not in log.pids:
            continue
        lines = (*log.head, *log.tail)
        for i, line in enumerate(lines):
            m = _THREAD_DIED.search(line)
            if not m or m.group("name") in live:
                continue
            if alone and not death_is_own(bundle, p.key[0], p.pid, log, lines[i + 1 :]):
                continue
            return m.group("name"), _with_exception(line, lines[i + 1 :])
    return "", ""


def dead_thread(
    bundle: Bundle, p: ProcSignals, live: Container[str], alone: bool = False
) -> Tuple[str, str]:
    """``_dead_thread`` for other causes (a spin on a flag a dead thread was to set,
    ``dead_setter``): one reading of "Exception in thread NAME" for the verdict."""
    return _dead_thread(bundle, p, live, alone)


def _with_exception(line: str, after: Sequence[str]) -> str:
    """The death line with the exception that ends its traceback: "Exception in thread
    warmup: RuntimeError: could not load the tokenizer" (its first unindented line that is
    no "Traceback" header, within the traceback's few dozen lines)."""
    text = line.strip()
    for nxt in after[:64]:
        if nxt and not nxt[:1].isspace() and not nxt.startswith("Traceback"):
            text = f"{text.rstrip(':')}: {nxt.strip()}"
            break
    return text[:MAX_QUOTE_CHARS]


def pile_up(bundle: Bundle, p: ProcSignals, seq: Sequence[ProcessSample]) -> Optional[PileUp]:
    """The process's pile-up, or None: threads on one lock in every sample, at least
    ``PILE_MIN`` in the last and more than in the first (or ``PILE_MIN`` in every sample: a
    full pool), its holder parked untimed inside the same frame, and no thread of the process
    working in any sample. ``seq``: its samples, in order."""
    if len(seq) < 2:
        return None
    by_sample = [_lock_waiters(bundle, ps) for ps in seq]
    for addr, last in by_sample[-1].items():
        counts = tuple(len(w.get(addr, ())) for w in by_sample)
        # growing, or a pool already full (its size of threads parked on the lock in
        # every sample: a thread pool's workers cannot grow past it)
        grows, full = counts[-1] > counts[0], min(counts) >= PILE_MIN
        if counts[-1] < PILE_MIN or 0 in counts or not (grows or full):
            continue
        frame = last[0][1]
        waiters = {t.tid for w in by_sample for t, _ in w.get(addr, ())}
        found = _holder(bundle, seq, frame, waiters)
        if found is None or not _nobody_works(bundle, seq, waiters):
            continue
        holder, label = found
        live = {t.py_thread_name or t.name for t in seq[-1].threads}
        dead, line = _dead_thread(bundle, p, live)
        return PileUp(
            key=p.key,
            frame=frame.name,
            counts=counts,
            holder_tid=holder.tid,
            holder_name=holder.py_thread_name or holder.name,
            holder_wait=label,
            waits_for=_waits_for(label),
            serves=bool(seq[-1].listen_ports),
            dead_thread=dead,
            dead_line=line,
        )
    return None


def pile_ups(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[PileUp]:
    """Every live process's pile-up, biggest pile first."""
    series = _series(bundle)
    found: List[PileUp] = []
    for p in procs:
        if p.dead:
            continue
        seq = series.get(p.key, [])
        pu = unless_found_nothing(
            bundle, "pile_up", p.series_class, partial(pile_up, bundle, p, seq)
        )
        if pu is not None:
            found.append(pu)
    return sorted(found, key=lambda pu: -pu.counts[-1])
