"""What one thread is doing at one sample: working, or waiting - and on what.

The bridge between a thread sample (kernel state, wait channel, syscall, Python stack) and the
wait kinds of ``diag.verdict.waits``: the Python stack is read first (py-spy names the function a
thread is parked in), the kernel second (for native threads, and for C calls py-spy cannot see
into). A rank's C call that blocks straight from user code is a wait on its peers.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from diag.frames import is_library
from diag.frameworks import union
from diag.model import Bundle, Frame, ProcessInfo, ProcessSample, ThreadSample
from diag.verdict.bundle_index import derived, keep, known
from diag.verdict.waits import (
    SLEEP,
    STDIN,
    STOPPED,
    WRAPPERS,
    comm_module,
    kernel_wait,
    short_name,
    stack_wait,
)
from diag.vocab import WaitKind


@dataclass(frozen=True)
class ThreadWait:
    """What one thread was doing at one sample: a wait kind (None = working) and its frame."""

    kind: Optional[WaitKind]
    label: str  # the frame it waits in or burns in; thread name for native threads
    caller: str  # the first user frame below the wait, "" if none
    timed: Optional[bool] = None  # the blocking syscall has a timeout (see ThreadSample)
    native: bool = False  # the kind came from the kernel: Python code called into C and blocked
    # It waits for a signal (``signal.pause()``, ``sigwait``, ``sigsuspend``): only a
    # ``kill`` from outside - or a timer it armed itself (``alarm``) - ends the wait.
    signal: bool = False


def frames_of(bundle: Bundle, stack_id: Optional[str]) -> Tuple[Frame, ...]:
    if stack_id is None:
        return ()
    stack = bundle.stacks.get(stack_id)
    return stack.frames if stack is not None else ()


_MEMO_MAX = 1 << 16


def thread_wait(bundle: Bundle, thread: ThreadSample) -> ThreadWait:
    """Classify one thread: Python stack first, kernel wait channel second.

    Memoised on what it reads (a merged bundle of 4,096 ranks asks about millions of
    threads, most of them alike): the thread's stack id and kernel state, for the bundle's
    stacks (a stack id is a content hash, so a stacks dict that only grew answers the same)."""
    memo: Dict[Tuple[object, ...], ThreadWait] = derived("thread_wait.waits", bundle.stacks, dict)
    if len(memo) > _MEMO_MAX:
        memo.clear()
    peers = thread.tid in peer_tids(bundle)
    key = (thread.stack_id, thread.state, thread.wchan, thread.syscall, thread.syscall_fd,
           thread.wait_timed, thread.py_thread_name, thread.name, peers)  # fmt: skip
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _thread_wait(bundle, thread, peers)
    return hit


# Threads a collective backend starts (its pack's ``backend_threads``): gloo's, torch's NCCL
# watchdog and heartbeat, NCCL's own proxy threads, c10d's store.
_BACKEND_THREADS = union.BACKEND_THREADS
_TID = attrgetter("tid")


def peer_tids(bundle: Bundle) -> FrozenSet[int]:
    """The threads (by tid) of processes that have peers to wait on: a declared rank of a
    multi-rank job, or a process running a collective backend (its threads, or a
    torch.distributed / comm-module frame on any of its stacks). Only there is a bare
    ``all_reduce``/``barrier`` in the job's own code a collective (``waits.BARE_COLLECTIVES``):
    a lone process's own ``all_reduce()`` has no one to wait for. Keyed by tid: in a merged
    bundle two hosts' tids may clash, and then either one's peers count for both (a process
    that is no rank of a distributed job rarely names its own functions like collectives)."""
    held: Optional[Tuple[object, FrozenSet[int]]] = known("thread_wait.peer_tids", bundle.samples)
    if held is not None and held[0] is bundle.processes:
        return held[1]
    tids = _peer_tids(bundle)
    keep("thread_wait.peer_tids", bundle.samples, (bundle.processes, tids))
    return tids


def _peer_tids(bundle: Bundle) -> FrozenSet[int]:
    ranks = {(p.host, p.pid) for p in bundle.processes if _declared_rank(p)}
    comm_stacks: Dict[str, bool] = {}
    with_peers: Set[Tuple[str, int]] = set(ranks)
    for sample in bundle.samples:
        for ps in sample.processes:
            key = (ps.host, ps.pid)
            if key not in with_peers and _backend(bundle, ps, comm_stacks):
                with_peers.add(key)
    tids: Set[int] = set()
    # A C loop over each thread, once a threads tuple: a merge shares equal tuples
    # (``diag.bundle.intern``), so at 16,384 ranks most of the 15 million are read once.
    read: Set[int] = set()  # ids of the tuples read; the bundle holds them, so ids stay theirs
    for sample in bundle.samples:
        for ps in sample.processes:
            threads = ps.threads
            if id(threads) not in read and (ps.host, ps.pid) in with_peers:
                read.add(id(threads))
                tids.update(map(_TID, threads))
    return frozenset(tids)


def _declared_rank(info: ProcessInfo) -> bool:
    declared = not (info.rank_source or "").startswith("inferred")
    return info.rank is not None and (info.world_size or 0) > 1 and declared


def _backend(bundle: Bundle, ps: ProcessSample, comm_stacks: Dict[str, bool]) -> bool:
    """A collective backend runs in this process sample: its threads, or a comm frame."""
    for t in ps.threads:
        if t.name.startswith(_BACKEND_THREADS):
            return True
        sid = t.stack_id
        if sid is not None:
            if sid not in comm_stacks:
                comm_stacks[sid] = any(map(comm_module, frames_of(bundle, sid)))
            if comm_stacks[sid]:
                return True
    return False


def _thread_wait(bundle: Bundle, thread: ThreadSample, peers: bool) -> ThreadWait:
    frames = frames_of(bundle, thread.stack_id)
    if thread.state in ("T", "t"):
        return ThreadWait(STOPPED, frames[0].name if frames else thread.name or "?", "")
    found = stack_wait(frames, peers)
    caller = ""
    if found is not None:
        found_kind, index = found
        caller = next(
            (
                f.name
                for f in frames[index + 1 :]
                if short_name(f.name) not in WRAPPERS and not is_library(f)
            ),
            "",
        )
        return ThreadWait(found_kind, frames[index].name, caller, thread.wait_timed)
    label = frames[0].name if frames else (thread.py_thread_name or thread.name or "?")
    if thread.state == "S" and signal_wait(thread):
        return ThreadWait(SLEEP, label, "", thread.wait_timed, native=True, signal=True)
    if thread.state in ("S", "D", "I"):
        kind = kernel_wait(thread.wchan, thread.syscall)
        if thread.state == "D":
            kind = kind or "disk"
        elif thread.syscall == "read" and thread.syscall_fd == 0 and kind != "disk":
            kind = STDIN  # input() or sys.stdin.read(): waits for someone to type or pipe in
        return ThreadWait(kind or "blocked", label, "", thread.wait_timed, native=True)
    return ThreadWait(None, label, "")


# Where the kernel parks a thread that waits for a signal: ``pause(2)`` (``signal.pause()``),
# ``rt_sigsuspend`` (``sigsuspend``) and ``rt_sigtimedwait`` (``signal.sigwait``,
# ``sigtimedwait``, ``sigwaitinfo``); the latter two by their x86_64 numbers too, which the
# probe records only as ``nr_N`` (the wait channel names them on every architecture).
_SIGNAL_WCHANS = ("__do_sys_pause", "sys_pause", "sigsuspend", "__do_sys_rt_sigsuspend",
                  "do_sigtimedwait", "__do_sys_rt_sigtimedwait")  # fmt: skip
_SIGNAL_SYSCALLS = frozenset({"pause", "rt_sigsuspend", "rt_sigtimedwait", "nr_128", "nr_130"})


def signal_wait(thread: ThreadSample) -> bool:
    """The thread sleeps until a signal comes: a supervisor waiting for SIGTERM, a worker
    parked in ``signal.pause()``. Read as a timer ("it wakes on a timer, polling") that sent
    users looking for a poll loop; nothing in the process acts - only a ``kill`` does."""
    if thread.syscall in _SIGNAL_SYSCALLS:
        return True
    return bool(thread.wchan) and str(thread.wchan).startswith(_SIGNAL_WCHANS)


NATIVE_PEER_LABEL = "<C call>"
_OPAQUE_KINDS: FrozenSet[WaitKind] = frozenset({"lock", "event-loop", "socket-read", "blocked"})


def rank_wait(bundle: Bundle, info: ProcessInfo, thread: ThreadSample) -> ThreadWait:
    """A rank's main thread blocked inside a C call made straight from user code (no library
    frame on top) is waiting on its peers: that is how ``store.wait``/``store.get``,
    ``work.wait()`` and other c10d calls look - py-spy sees only the caller, the kernel a
    poll, recv or futex. Elsewhere the same kernel wait keeps its plain meaning."""
    tw = thread_wait(bundle, thread)
    frames = frames_of(bundle, thread.stack_id)
    if (
        _declared_rank(info)
        and tw.native
        and tw.kind in _OPAQUE_KINDS
        and frames
        and not is_library(frames[0])
    ):
        return ThreadWait("native-peer", NATIVE_PEER_LABEL, frames[0].name, tw.timed, True)
    return tw


def alone_on_own_queue(bundle: Bundle, alive: List[ProcessSample]) -> bool:
    """A process of one thread, waiting in a ``queue.Queue`` (``get`` or ``put``) in every
    sample, timed or not, with no port: a thread queue is filled and drained only by threads of
    its own process, and there is no other - nothing can ever end the wait (the producer thread
    died: "Exception in thread prefetch" in the log, and a ``get(timeout=1)`` loop that polls
    for ever). One OS thread, not one Python thread: a native thread could call back in."""
    if len(alive) < 2 or any(ps.listen_ports or len(ps.threads) != 1 for ps in alive):
        return False
    for ps in alive:
        frames = frames_of(bundle, ps.threads[0].stack_id)[:6]
        if not any(f.filename.endswith(union.QUEUE_FILES) for f in frames):
            return False
    return True
