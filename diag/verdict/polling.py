"""Poll loops: a thread that burns a core asking "anything for me?" and getting "no".

The misread this guards against: a server's scheduler that spins on nothing to receive (a
non-blocking receive raising ``EAGAIN``/``zmq.Again``, an ``on_idle`` hook, ``sched_yield``,
a ``select`` with a zero timeout, an empty batch broadcast to its tensor-parallel peers every
iteration) shows 100% of a core and a stack that changes from sample to sample - exactly what
"CPU-bound, wait, don't kill" looks like to a classifier that counts motion as work. So does a
rank that busy-polls a collective's completion (``fut.done()`` in a loop): its CPU is that
collective's wait, and when a peer never joins it is a deadlock, not slow work.

A thread is a *poll loop* when every sample of it (two at least) sits in the idle path of one
loop - or two thirds of them, the rest in that loop's own iteration (the majority rule below) -
and at least one sample shows an explicit poll marker:

- a *marker* frame anywhere on the stack: an idle hook (``on_idle``, ``..._idle_...``), a
  failed non-blocking receive (``zmq/error.py``: the ``Again`` being raised), a non-blocking
  queue or socket call (``get_nowait``, ``recv_nowait``, ``try_recv``), a yield
  (``sched_yield``), or a completion poll (torch ``Future.done``/``wait``, ``Event.query``,
  ``is_completed``);
- a receive or poll call (ZeroMQ's ``recv``, ``select``, a queue read) caught *running* as the
  innermost frame: it returned at once, with nothing - a blocking one sleeps when idle;
- a *known wait* (``diag.verdict.waits``): the zero-timeout ``select``, the broadcast of an
  empty batch, a queue read - what the loop calls between its polls;
- or a frame a marker of another sample runs under, sampled as the innermost one: the loop
  between two calls (same functions, same outer stack, whatever the line).

A loop whose samples leave that path for a ``forward``, a ``run_batch`` or a model's frames does
real work between polls and is no poll loop: a busy server stays busy. A loop caught *once* in
the rest of its own iteration (SGLang's ``get_next_batch_to_run`` picking no batch) still polls:
the *majority rule* (``_strays_in_iteration``) lets a minority of samples sit elsewhere in the
iteration of the loop that calls the receive step. Pure functions of stacks - but for a loop
whose poll call adds no Python frame (``time.sleep(0)``, ``os.sched_yield()``): its stack is one
line of the job's own code, and only the kernel's view tells it from work (``yield_loop``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Dict, Final, FrozenSet, List, Literal, Optional, Sequence, Set, Tuple

from diag.frames import is_library
from diag.frameworks import union
from diag.model import Bundle, Frame, ProcessSample, ThreadSample
from diag.verdict.thread_wait import ThreadWait, frames_of
from diag.verdict.waits import (
    FAMILY,
    PEER,
    SLEEP,
    WRAPPERS,
    YIELDS,
    frame_kind,
    kernel_wait,
    short_name,
    stack_wait,
)
from diag.vocab import WaitKind

# What a marker says the loop polls for.
PollMarker = Literal[
    "idle-hook",
    "nonblocking",
    "receive",
    "yield",
    "completion",
    "handout",
    "kernel-yield",
    "check",
]

# How a sentence names each marker.
MARKER_WORDS: Dict[PollMarker, str] = {
    "idle-hook": "an idle hook",
    "nonblocking": "receives that return at once",
    "receive": "a receive loop finding nothing",
    "yield": "yields",
    "completion": "completion polls",
    "handout": "the empty batch its poll loop hands out",
    "kernel-yield": "a call on one line that hands the CPU back at once (sleep(0), sched_yield)",
    "check": "a check that returns at once (a file's existence, an event, a queue's size)",
}

POLL_KIND: Final = "poll"  # the wait kind of a poll loop that polls for work (waits.FAMILY: serve)

_IDLE_HOOK = re.compile(r"(?:^|_)idle(?:_|$)", re.IGNORECASE)
_NONBLOCKING_NAMES = union.NONBLOCKING_FRAMES
# Files whose frames are a receive that found nothing: pyzmq builds the ``Again`` it raises in
# Python (``ZMQError.__init__``), so a NOBLOCK receive on an empty socket shows there.
_NONBLOCKING_FILES = union.NONBLOCKING_FILES
# Completion polls on asynchronous device or collective work: the loop asks "done yet?".
_COMPLETION = union.COMPLETION_FRAMES


# Checks that return at once: a yes/no (or a size) about the world, microseconds each. One in
# every sample, called from one line, is a loop asking it again and again (``while not
# os.path.exists(flag): pass``), never one long call: a stat has nothing to compute.
_CHECKS = union.CHECK_FRAMES


def frame_marker(frame: Frame) -> Optional[PollMarker]:
    """The poll marker one frame is, or None."""
    name = short_name(frame.name)
    for sign in _CHECKS:
        if name in sign.names and frame.filename.endswith(sign.files):
            return "check"
    if frame.filename.endswith(_NONBLOCKING_FILES) or name in _NONBLOCKING_NAMES:
        return "nonblocking"
    if name in YIELDS:
        return "yield"
    for sign in _COMPLETION:
        if name in sign.names and (not sign.files or frame.filename.endswith(sign.files)):
            return "completion"
    if _IDLE_HOOK.search(name):
        return "idle-hook"
    return None


def stack_markers(frames: Sequence[Frame]) -> Tuple[Tuple[PollMarker, int], ...]:
    """Every marker on a stack with its frame index (innermost first)."""
    out = []
    for index, frame in enumerate(frames):
        marker = frame_marker(frame)
        if marker is not None:
            out.append((marker, index))
    return tuple(out)


Sig = Tuple[Tuple[str, str], ...]  # a stack by (name, file): line numbers move within a loop


def _sig(frames: Sequence[Frame]) -> Sig:
    return tuple((f.name, f.filename) for f in frames)


@dataclass(frozen=True)
class PollLoop:
    """A thread's poll loop over the capture: the frame that loops, what it polls with, and
    the wait it stands for (``poll`` for work, or a peer wait when it polls a collective)."""

    wait: ThreadWait
    markers: Tuple[PollMarker, ...]
    samples: int
    strays: int = 0  # samples elsewhere in the loop's own iteration (the majority rule)


def _common_outer(sigs: Sequence[Sig]) -> Sig:
    """The outer frames every stack shares (stacks are innermost first: compare from the end)."""
    if not sigs:
        return ()
    shortest = min(len(s) for s in sigs)
    n = 0
    while n < shortest and all(s[-1 - n] == sigs[0][-1 - n] for s in sigs):
        n += 1
    return sigs[0][len(sigs[0]) - n :] if n else ()


# A receive or poll call (the innermost frame) caught *running*, not asleep in the kernel: it
# returned at once, nothing to receive. A blocking receive sleeps (state S) when idle.
_RECEIVE_KINDS: FrozenSet[WaitKind] = frozenset({"event-loop", "queue", "socket-read", "accept"})
_RECEIVE_FILES = union.POLL_FILES
_RECEIVE_DEPTH = 3  # a receive's own helpers (Condition.__exit__ in Queue.get) sit above it


# The job's own receive step, by name (SGLang's ``recv_requests``, ``poll_queue``), caught
# running: a loop between two of its receives.
_RECEIVE_NAME = re.compile(r"^_*(?:recv|receive|poll)(?:_|$)", re.IGNORECASE)
_RECEIVE_STEPS = union.POLL_FRAMES  # the packs' receive steps named otherwise


def _receive_named(frame: Frame) -> bool:
    name = short_name(frame.name)
    return bool(_RECEIVE_NAME.search(name)) or name in _RECEIVE_STEPS


# How deep under it the running frame may be: SGLang's broadcast of the batch sits 4 frames
# below ``recv_requests``; a model's forward under an outer ``poll_*`` loop sits far deeper.
_RECEIVE_STEP_DEPTH = 8


def _receives(frame: Frame) -> bool:
    name = short_name(frame.name)
    if frame.filename.endswith(_RECEIVE_FILES):
        return name.startswith("recv") or name == "poll"
    return frame_kind(frame) in _RECEIVE_KINDS


def sample_markers(frames: Sequence[Frame], running: bool) -> Tuple[Tuple[PollMarker, int], ...]:
    """The markers of one sample: its stack's, and a receive caught running - inside the
    receive call itself (the first few frames, library code down to it: not an event loop
    far below a handler)."""
    found = stack_markers(frames)
    if not running:
        return found
    for index, frame in enumerate(frames[:_RECEIVE_DEPTH]):
        if _receives(frame):
            return (("nonblocking", index), *found)
        if not is_library(frame):
            break
    known = stack_wait(frames)
    if known is not None and FAMILY.get(known[0]) == PEER:
        return found  # a pipeline stage's recv_forward in a collective: the peer's wait
    step = frames[:_RECEIVE_STEP_DEPTH]
    named = next((i for i, f in enumerate(step) if _receive_named(f)), -1)
    return (("receive", named), *found) if named >= 0 else found


# How far below a frame the polls run under a sample may be and still be the loop's own
# bookkeeping between two polls (a flag read: ``EnvField.get`` <- ``is_disable_overlap_...``
# <- the loop): real work (``run_batch`` -> ``forward`` -> the model) is deeper.
_BOOKKEEPING_DEPTH = 2


_ACCESSOR = re.compile(r"^_*(?:is|has|get|should|can|check)(?:_|$)|^__getattr", re.IGNORECASE)


def _near_loop(sig: Sig, outer: Set[Sig]) -> bool:
    """The sample is the loop between two polls: a frame the polls run under, or at most
    ``_BOOKKEEPING_DEPTH`` frames below one, each of them reading a flag (``is_...``,
    ``get``, ``__getattr__``) or a decorator's wrapper with nothing under it yet (SGLang wraps
    ``on_idle`` and ``recv_requests`` in two: a sample caught in them is the loop calling its
    idle hook or its receive) - not a ``run_batch`` or a ``forward``, however shallow."""
    for k in range(_BOOKKEEPING_DEPTH + 1):
        if sig[k:] and sig[k:] in outer:
            return all(_bookkeeping(short_name(name)) for name, _ in sig[:k])
    return False


def _bookkeeping(name: str) -> bool:
    return bool(_ACCESSOR.search(name)) or name in WRAPPERS


def poll_loop(bundle: Bundle, samples: Sequence[Tuple[Optional[str], str]]) -> Optional[PollLoop]:
    """The poll loop one thread shows in its samples - (stack id, kernel state) each, oldest
    first - or None."""
    # A thread with no stack in any sample is no Python thread: nothing to read. A sample
    # whose stack came back empty (the reader caught the thread between frames) or was not
    # read at all (every reader torn by the running thread: py_status failed, or "not-python"
    # as py-spy's torn interpreter search read before) says nothing either way: judged on the
    # others, two at least. One unread sample of an idle SGLang scheduler read "slow: CPU-bound".
    if len(samples) < 2 or all(s is None for s, _ in samples):
        return None
    samples = [s for s in samples if frames_of(bundle, s[0])]
    if len(samples) < 2:
        return None
    frames = [frames_of(bundle, s) for s, _ in samples]
    found = [sample_markers(fr, state == "R") for fr, (_, state) in zip(frames, samples)]
    markers = [m for marks in found for m, _ in marks]
    if not markers:
        return None
    if set(markers) == {"receive"} and len({s for s, _ in samples}) == 1:
        return None  # one long call in a function named for receiving: it may compute
    outer: Set[Sig] = set()  # the frames a marker runs under, each as the innermost one
    for fr, marks in zip(frames, found):
        if marks:
            sig = _sig(fr)
            outer.update(sig[i:] for i in range(min(i for _, i in marks) + 1, len(sig)))
    peer_label = ""
    strays: List[int] = []  # samples off the poll path
    for n, (fr, marks) in enumerate(zip(frames, found)):
        if marks:
            continue
        known = stack_wait(fr)
        if known is not None:
            if FAMILY.get(known[0]) == PEER and not peer_label:
                peer_label = fr[known[1]].name
            continue
        if not _near_loop(_sig(fr), outer):
            strays.append(n)  # it left the idle path: real work, or the loop's own step
    if strays and not _strays_in_iteration(frames, found, strays):
        return None
    on_path = [fr for n, fr in enumerate(frames) if n not in strays]
    loop = _as_wait(on_path, tuple(dict.fromkeys(markers)), peer_label, len(samples))
    return dataclasses.replace(loop, strays=len(strays))


# The majority rule. A loop that busy-polls does more each iteration than ask for work: SGLang's
# also picks the next batch (``get_next_batch_to_run`` <- ``event_loop_overlap``), empty when
# idle, and one sample in a few dozen lands there (3 of 120 scheduler samples in 20 idle TP 2
# captures here; with the rank's other samples split between ``on_idle`` and the broadcast, 3
# of those captures read "progressing"). Two thirds of the samples on the poll path, three
# samples at least (2 of 3 - the default capture - 3 of 4, 7 of 10): a fixed share, not "all
# but one", which a longer capture of the same loop misses ever more often. What guards a busy
# server is what the strays show, not their count: each must be the iteration of the loop that
# calls the receive step, and no forward pass (a loaded scheduler is in one most of the time).
_MAJORITY = (2, 3)
_MAJORITY_MIN_SAMPLES = 3
# How far above a poll sample's receive step (its outermost marker, or a frame named for
# receiving near the top: ``recv_requests``) the loop's frame may be, counted in the job's own
# frames (not decorators, not library code): SGLang's loop calls ``on_idle`` directly and
# ``recv_requests`` through ``ingest_requests``. A frame further out (``run_event_loop``,
# ``main``, ``Thread.run``) is no loop that calls the receive step: anything may run under it.
_LOOP_REACH = 2
# How deep below the loop's frame a stray may run: the batch pick's flag read sits 5-8 below
# SGLang's loop (``getenv`` <- ``EnvField.get`` <- ``maybe_convert_decode_to_extend`` <-
# ``get_next_batch_to_run`` <- 2 decorators); a model's forward, were it not named, sits
# deeper (run_batch -> worker -> runner -> model -> layers).
_STEP_DEPTH = 10
# Real work between polls: a forward or backward pass, a batch run, a model's own frames.
_WORK_NAME = re.compile(r"(?:^|_)(?:forward|backward|run_batch)(?:_|$)", re.IGNORECASE)
_WORK_FILES = union.WORK_FILES


def _works(frame: Tuple[str, str]) -> bool:
    """A frame of real work: a loop that runs one between polls has something to do."""
    name, filename = frame
    return bool(_WORK_NAME.search(short_name(name))) or any(m in filename for m in _WORK_FILES)


def _own(frame: Tuple[str, str]) -> bool:
    """A frame of the job's own code: no decorator's wrapper, no library."""
    name, filename = frame
    return short_name(name) not in WRAPPERS and not is_library(Frame(name=name, filename=filename))


def _receive_step(frames: Sequence[Frame], marks: Tuple[Tuple[PollMarker, int], ...]) -> int:
    """Where a poll sample's receive step is: its outermost marker, or a frame named for
    receiving (``recv_requests``) within ``_RECEIVE_STEP_DEPTH`` of the top, if further out."""
    step = frames[:_RECEIVE_STEP_DEPTH]
    named = [i for i, f in enumerate(step) if _receive_named(f)]
    return max([i for _, i in marks] + named)


def _strays_in_iteration(
    frames: Sequence[Sequence[Frame]],
    found: Sequence[Tuple[Tuple[PollMarker, int], ...]],
    strays: Sequence[int],
) -> bool:
    """The samples off the poll path are a minority (``_MAJORITY``) and each is the same loop's
    iteration: the loop between two polls, caught in another step of its own body."""
    total = len(frames)
    want, of = _MAJORITY
    if total < _MAJORITY_MIN_SAMPLES or (total - len(strays)) * of < want * total:
        return False
    polls = [(_sig(fr), _receive_step(fr, marks)) for fr, marks in zip(frames, found) if marks]
    return all(_in_iteration(_sig(frames[n]), polls) for n in strays)


def _in_iteration(stray: Sig, polls: Sequence[Tuple[Sig, int]]) -> bool:
    """A stray runs under the frame that calls a poll sample's receive step: their innermost
    common caller sits above that step, at most ``_LOOP_REACH`` of the job's own frames, and
    the stray at most ``_STEP_DEPTH`` frames under it, with no real work on the way."""
    for sig, step in polls:
        shared = _common_outer([stray, sig])
        loop_at = len(sig) - len(shared)  # the loop's frame in the poll sample
        depth = len(stray) - len(shared)  # the stray's frames under the loop's
        if not shared or loop_at <= step or not 0 < depth <= _STEP_DEPTH:
            continue
        if sum(map(_own, sig[step + 1 : loop_at + 1])) <= _LOOP_REACH:
            return not any(map(_works, stray[:depth]))
    return False


def _as_wait(
    frames: Sequence[Sequence[Frame]],
    markers: Tuple[PollMarker, ...],
    peer_label: str,
    samples: int,
) -> PollLoop:
    outer = _common_outer([_sig(f) for f in frames])
    loop = outer[0][0] if outer else frames[-1][0].name
    caller = next((name for name, _ in outer[1:] if short_name(name) not in WRAPPERS), "")
    if set(markers) <= {"completion", "yield"} and (peer_label or "completion" in markers):
        # Asking "done yet?" of a collective or a device: that collective's wait.
        inner = next((fr[i] for fr in frames for m, i in stack_markers(fr) if m == "completion"),
                     None)  # fmt: skip
        label = peer_label or (inner.name if inner is not None else loop)
        wait = ThreadWait("collective", label, loop, timed=True)
    else:
        wait = ThreadWait(POLL_KIND, loop, caller, timed=True)
    return PollLoop(wait=wait, markers=markers, samples=samples)


# Threads of a collective library that run the collectives a rank started asynchronously:
# gloo's worker (``pt_gloo_runloop``) waits for work untimed, and for a peer's data with the
# process group's timeout - a timed futex wait is a collective in flight.
_COLLECTIVE_WORKERS = union.COLLECTIVE_WORKERS
POLLED_COLLECTIVE = "collective in flight, polled"  # the label of that wait


def collective_in_flight(alive: Sequence[ProcessSample]) -> bool:
    """A worker thread of the collective library waits on a peer in every sample."""

    def waiting(ps: ProcessSample) -> bool:
        return any(
            t.name in _COLLECTIVE_WORKERS and t.state == "S" and t.wait_timed is True
            for t in ps.threads
        )

    return len(alive) >= 2 and all(waiting(ps) for ps in alive)


def collective_spin(
    bundle: Bundle, alive: Sequence[ProcessSample], main_tid: int
) -> Optional[PollLoop]:
    """A rank's main thread running the same frame of its own code in every sample while a
    collective it started is in flight: it busy-polls that collective (``work.is_completed()``,
    ``fut.done()`` in a loop - C calls py-spy shows as their caller's line). That is the
    collective's wait. A torch frame on top (a long matmul) is compute, not a poll."""
    if not collective_in_flight(alive):
        return None
    stacks = {t.stack_id for ps in alive for t in ps.threads if t.tid == main_tid}
    if len(stacks) != 1 or None in stacks:
        return None
    frames = frames_of(bundle, next(iter(stacks)))
    if not frames or stack_wait(frames) is not None or is_library(frames[0]):
        return None
    if not all(any(t.tid == main_tid and t.state == "R" for t in ps.threads) for ps in alive):
        return None  # asleep in its own frame (a sleep in C, a blocking C call): not a spin
    wait = ThreadWait("collective", POLLED_COLLECTIVE, frames[0].name, timed=True)
    return PollLoop(wait=wait, markers=("completion",), samples=len(alive))


ThreadSeries = Tuple[Tuple[Optional[str], str], ...]  # (stack id, state) in each sample
PollMemo = Dict[ThreadSeries, Optional[PollLoop]]


def thread_samples(alive: Sequence[ProcessSample]) -> Dict[int, ThreadSeries]:
    """{tid: (stack id, state) in each sample} for the threads seen in every alive sample."""
    out: Dict[int, List[Tuple[Optional[str], str]]] = {}
    for n, ps in enumerate(alive):
        for t in ps.threads:
            if n == 0:
                out[t.tid] = [(t.stack_id, t.state)]
            elif t.tid in out and len(out[t.tid]) == n:
                out[t.tid].append((t.stack_id, t.state))
    return {tid: tuple(seen) for tid, seen in out.items() if len(seen) == len(alive)}


def poll_loops(
    bundle: Bundle, alive: Sequence[ProcessSample], memo: Optional[PollMemo] = None
) -> Dict[int, PollLoop]:
    """{tid: poll loop} for the threads of one process that poll in every alive sample: by
    their stacks (``poll_loop``), or by the kernel when the poll call adds no Python frame
    (``yield_loop``). ``memo``: the stack reading by a thread's samples, shared by the
    caller across one bundle's processes (4,096 ranks x 300 threads are mostly alike)."""
    out: Dict[int, PollLoop] = {}
    memo = {} if memo is None else memo
    # Once per process, not per thread: at 300 threads a rank a per-thread scan of every
    # thread is 90,000 looks a sample (4,096 ranks: classify went from 5 s to 35 s).
    in_flight = collective_in_flight(alive)
    by_tid: List[Dict[int, ThreadSample]] = []
    for tid, seen in thread_samples(alive).items():
        found = memo[seen] if seen in memo else memo.setdefault(seen, poll_loop(bundle, seen))
        if found is None and not in_flight:
            if not by_tid:
                by_tid = [{t.tid: t for t in ps.threads} for ps in alive]
            # Most threads burn nothing: the yield loop's first test, before its series.
            if _burns(bundle, alive, by_tid[0][tid], by_tid[-1][tid]):
                found = yield_loop(bundle, alive, tid, [m.get(tid) for m in by_tid])
        if found is not None:
            out[tid] = found
    return out


# ``time.sleep(0)`` and ``os.sched_yield()`` are C calls: a loop polling with them shows only
# its own frame, one line, in every sample - what one long computing call looks like. What
# tells them apart is where the CPU goes and what it moves (``yield_loop``).
KERNEL_SHARE = 0.5  # the thread's own CPU spent in the kernel (stime over utime + stime)
SLEEPING_KERNEL_SHARE = 0.25  # ... when it also gives the CPU up thousands of times a second
YIELD_SWITCHES_PER_S = 1000.0  # voluntary context switches a second: it sleeps every iteration
STILL_IO_BYTES_PER_S = 64 << 10  # rchar + wchar a second of the process: no I/O to speak of
STILL_RSS_BYTES = 16 << 20  # RSS change over the capture: no memory being filled
_MIN_CPU = 0.05  # of one core: below it nothing burns and there is nothing to explain


def yield_loop(
    bundle: Bundle,
    alive: Sequence[ProcessSample],
    tid: int,
    series: Optional[Sequence[Optional[ThreadSample]]] = None,
) -> Optional[PollLoop]:
    """A thread that polls by giving the CPU up each iteration, read from the kernel.

    Every sample shows the same stack, line included, in the job's own code and outside any
    known wait; the thread is running or in a timer sleep at each; and over the capture

    - its CPU goes mostly to the kernel (``KERNEL_SHARE``): each iteration is a syscall that
      does nothing (``sched_yield``, a zero ``nanosleep``) around a few bytecodes of "empty?";
    - it gives the CPU up each iteration: thousands of voluntary switches a second
      (``sleep(0)``: a zero sleep still sleeps the timer slack), or it is running in every
      sample (``sched_yield``: a yield leaves the thread runnable - no voluntary switch, and
      no syscall /proc can read from a running thread);
    - and the kernel time moves nothing: no bytes read or written, no memory filled.

    Real work is not that. Work between short sleeps runs in user space (bytecode, numpy),
    so its CPU is the user's and its samples land on the work's frames and lines, not the
    sleep's; a long C call on one line computes in user space too; work done in the kernel
    (reads, writes, page faults of filled memory) moves rchar/wchar or RSS. A thread whose
    process has a collective in flight is that collective's poll (``collective_spin``).
    ``series``: the thread in each sample, when the caller (``poll_loops``) has them, and has
    ruled a collective in flight out."""
    if series is None:
        if collective_in_flight(alive):
            return None
        series = [next((t for t in ps.threads if t.tid == tid), None) for ps in alive]
    threads = [t for t in series if t is not None]
    if len(threads) < 2 or len(threads) != len(alive):
        return None
    first, last = threads[0], threads[-1]
    # The cheap tests first (every thread of every rank comes here): CPU, stack, state.
    if not _burns(bundle, alive, first, last):
        return None
    dt_s = (alive[-1].t_s or 0.0) - (alive[0].t_s or 0.0)
    user = last.utime_ticks - first.utime_ticks
    kernel = last.stime_ticks - first.stime_ticks
    if not _one_call_site(bundle, [t.stack_id for t in threads]):
        return None
    # Asleep with no wait the kernel names counts too: a thread caught going to sleep (state
    # S read, then its syscall as "running") between two of its million iterations.
    if not all(t.state == "R" or kernel_wait(t.wchan, t.syscall) in (SLEEP, None) for t in threads):
        return None
    frames = frames_of(bundle, first.stack_id)
    if not frames:
        return None
    if stack_wait(frames) is not None or is_library(frames[0]):
        return None
    if not _moves_nothing(alive, dt_s):
        return None
    switches = (last.voluntary_ctxt_switches or 0) - (first.voluntary_ctxt_switches or 0)
    sleeps = switches / dt_s >= YIELD_SWITCHES_PER_S
    # A sleep(0) loop's few bytecodes around each syscall take 40-60 % of its CPU (measured:
    # 44 % kernel in one run): with thousands of sleeps a second, a quarter in the kernel is
    # enough; a sched_yield spin, which never sleeps, must show the kernel's half.
    share = SLEEPING_KERNEL_SHARE if sleeps else KERNEL_SHARE
    if kernel < share * (user + kernel):
        return None
    if not (sleeps or all(t.state == "R" for t in threads)):
        return None
    caller = next((f.name for f in frames[1:] if short_name(f.name) not in WRAPPERS), "")
    wait = ThreadWait(POLL_KIND, frames[0].name, caller, timed=True)
    return PollLoop(wait=wait, markers=("kernel-yield",), samples=len(threads))


# How many lines apart the innermost frame's samples may be and still be one poll's lines:
# ``if slot.value == 0:`` and ``os.sched_yield()`` - not a line of work further down the loop.
_POLL_LINES_SPAN = 2


def _one_call_site(bundle: Bundle, stack_ids: Sequence[Optional[str]]) -> bool:
    """The same stack in every sample, or but for the innermost frame's line within
    ``_POLL_LINES_SPAN``: a loop around its yield (``if slot.value == 0: os.sched_yield()``)
    is caught on either line (a fresh clone's run under load read one such engine
    "CPU-bound"). A sample further down the loop is its work between polls: no yield loop."""
    ids = set(stack_ids)
    if None in ids:
        return False
    if len(ids) == 1:
        return True
    shapes = set()
    lines = []
    for sid in ids:
        frames = frames_of(bundle, sid)
        if not frames:
            return False
        shapes.add((tuple((f.name, f.filename) for f in frames), tuple(f.line for f in frames[1:])))
        lines.append(frames[0].line)
    return len(shapes) == 1 and max(lines) - min(lines) <= _POLL_LINES_SPAN


def _burns(
    bundle: Bundle, alive: Sequence[ProcessSample], first: ThreadSample, last: ThreadSample
) -> bool:
    """The thread used ``_MIN_CPU`` of a core or more between the first and last sample."""
    dt_s = (alive[-1].t_s or 0.0) - (alive[0].t_s or 0.0)
    ticks = last.utime_ticks + last.stime_ticks - first.utime_ticks - first.stime_ticks
    return dt_s > 0 and ticks / (bundle.host.clk_tck or 100) / dt_s >= _MIN_CPU


def _moves_nothing(alive: Sequence[ProcessSample], dt_s: float) -> bool:
    """The process read and wrote next to nothing and filled no memory over the capture."""
    first, last = alive[0], alive[-1]
    if abs(last.rss_bytes - first.rss_bytes) >= STILL_RSS_BYTES:
        return False
    if first.io is None or last.io is None:
        return True
    moved = (last.io.rchar - first.io.rchar) + (last.io.wchar - first.io.wchar)
    return moved / dt_s < STILL_IO_BYTES_PER_S
