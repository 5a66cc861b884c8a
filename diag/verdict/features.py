"""Per-process features of a sample series: what moved, where the CPU went, what each waits on.

The classifier never looks at raw samples; it reads these features. Each one is a *delta*
between samples (one snapshot says nothing about progress) or a fact that holds in every
sample (a stack that never changed, a lock address that never moved).

CPU is split by where it burns: ``compute`` (a thread outside any known wait, or whose stack
moved between samples) versus ``spin`` (a thread whose unchanged stack sits in a known wait -
CUDA synchronize, a gloo collective - burning a core without progress). Native threads with
no Python stack take the side of their process's main thread: spinning while it waits on a
peer, working otherwise.
"""

from __future__ import annotations

from typing import Dict, Hashable, List, Optional, Tuple

from diag.frames import is_installed_plumbing
from diag.model import Bundle, ProcessInfo, ProcessSample, main_thread
from diag.verdict.fed_socket import fed_socket
from diag.verdict.intervals import hot_label, interval_deltas
from diag.verdict.native_waits import NativeSpin, native_spin
from diag.verdict.polling import PollLoop, PollMemo, collective_spin, poll_loops
from diag.verdict.proc_classes import SharedThreads, class_key, record_classes
from diag.verdict.short_requests import short_requests
from diag.verdict.signals import COMPUTE_PCT, DEAD_STATUSES, ProcSignals
from diag.verdict.thread_wait import (
    ThreadWait,
    alone_on_own_queue,
    frames_of,
    rank_wait,
    thread_wait,
)
from diag.verdict.waits import PEER, family
from diag.vocab import WaitKind

__all__ = [
    "COMPUTE_PCT",
    "DEAD_STATUSES",
    "ProcSignals",
    "ThreadWait",
    "extract",
    "frames_of",
    "thread_wait",
]


def _series(bundle: Bundle) -> Dict[Tuple[str, int], List[Tuple[int, float, ProcessSample]]]:
    out: Dict[Tuple[str, int], List[Tuple[int, float, ProcessSample]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            out.setdefault((ps.host, ps.pid), []).append((sample.index, ps.t_s or sample.t_s, ps))
    return out


def extract(bundle: Bundle) -> List[ProcSignals]:
    """One ``ProcSignals`` per process seen in any sample, in first-seen order."""
    infos = {(p.host, p.pid): p for p in bundle.processes}
    clk = bundle.host.clk_tck or 100
    out: List[ProcSignals] = []
    memo: PollMemo = {}  # poll loops by a thread's samples, across processes
    # Processes whose series read the same (``proc_classes``): computed once a class.
    classes: Dict[Hashable, ProcSignals] = {}
    shared = SharedThreads()
    for key, series in _series(bundle).items():
        info = infos.get(key, ProcessInfo(pid=key[1], host=key[0]))
        class_of = class_key(series, info, shared)
        same = classes.get(class_of) if class_of is not None else None
        if same is not None:
            out.append(_member(same, key, info))
            continue
        sig = _signals(bundle, key, info, series, clk, memo)
        sig.series_class = len(out)  # the first member's position: unique in this bundle
        if class_of is not None:
            classes[class_of] = sig
        out.append(sig)
    record_classes(bundle, {p.key: p.series_class for p in out if p.series_class is not None})
    return out


def _signals(
    bundle: Bundle,
    key: Tuple[str, int],
    info: ProcessInfo,
    series: List[Tuple[int, float, ProcessSample]],
    clk: int,
    memo: PollMemo,
) -> ProcSignals:
    sig = ProcSignals(key=key, info=info)
    alive = _statuses(bundle, sig, series)
    loops = poll_loops(bundle, [ps for _, ps in alive], memo) if len(alive) > 1 else {}
    _drop_fed_receive(loops, [ps for _, ps in alive])
    _collective_spin(bundle, info, [ps for _, ps in alive], loops)
    spins = _native_spins(bundle, [ps for _, ps in alive], loops, _rank_of_many(info))
    _rates(bundle, sig, alive, clk, loops)
    if alive:
        _window(bundle, sig, alive, clk, loops)
        main = main_thread(alive[-1][1])
        first = next(iter(spins.values()), None)
        sig.native_spin = spins.get(main.tid, first) if main is not None else first
    return sig


# The markers a receive caught running gives: "it returned at once, with nothing".
_RECEIVE_MARKERS = frozenset({"nonblocking", "receive"})


def _drop_fed_receive(loops: Dict[int, PollLoop], alive: List[ProcessSample]) -> None:
    """A main thread read as a poll loop only because its receive was caught running is no
    poll loop when tcp_info says data keeps arriving on the socket it blocks reading
    (``fed_socket``): the receive returned with data - a consumer of a feed, fed."""
    main = main_thread(alive[-1]) if alive else None
    loop = loops.get(main.tid) if main is not None else None
    if main is None or loop is None or not set(loop.markers) <= _RECEIVE_MARKERS:
        return
    if fed_socket(alive) is not None:
        del loops[main.tid]


def _member(same: ProcSignals, key: Tuple[str, int], info: ProcessInfo) -> ProcSignals:
    """Another process of ``same``'s class: its features, its own identity, and containers
    of its own (a later step that edits one process's lists must not edit its class's)."""
    # ``copy.copy`` of a plain dataclass (no slots, no __copy__), without its reduce protocol:
    # its fields are its instance dict.
    out = object.__new__(type(same))
    mine = out.__dict__
    mine.update(same.__dict__)
    for name, value in mine.items():
        if isinstance(value, (list, dict)):
            mine[name] = type(value)(value)
    out.key, out.info = key, info
    return out


def _statuses(
    bundle: Bundle, sig: ProcSignals, series: List[Tuple[int, float, ProcessSample]]
) -> List[Tuple[float, ProcessSample]]:
    """Each sample's status, exit and main-thread wait; the samples it was alive in."""
    alive: List[Tuple[float, ProcessSample]] = []
    ports: List[int] = []
    for index, t_s, ps in series:
        sig.samples.append(index)
        sig.statuses.append(ps.status)
        ports.extend(ps.listen_ports)
        sig.py_ok = sig.py_ok or ps.py_status == "ok"
        if ps.status in DEAD_STATUSES:
            if sig.dead_since is None:
                sig.dead_since = index
            if ps.exit_code is not None:
                sig.exit_code = ps.exit_code
            continue
        if ps.status == "alive":
            main = main_thread(ps)
            sig.main_stack_ids.append(main.stack_id if main else None)
            tw = thread_wait(bundle, main) if main else None
            sig.main_wait_labels.append(tw.label if tw and tw.kind else "")
            alive.append((t_s, ps))
    sig.listen_ports = tuple(sorted(set(ports)))
    return alive


def _rates(
    bundle: Bundle,
    sig: ProcSignals,
    alive: List[Tuple[float, ProcessSample]],
    clk: int,
    loops: Dict[int, PollLoop],
) -> None:
    """CPU, compute and spin over the window (CPU time over wall time), and where they go."""
    labels: Dict[str, float] = {}
    native_labels: Dict[str, float] = {}
    spin_labels: Dict[str, float] = {}
    span_s = 0.0
    for (t_a, a), (t_b, b) in zip(alive, alive[1:]):
        dt_s = t_b - t_a
        if dt_s <= 0:
            continue
        sig.intervals += 1
        span_s += dt_s
        interval_deltas(bundle, sig, a, b, dt_s, clk, (labels, native_labels), spin_labels, loops)
    if span_s > 0:
        sig.cpu_pct /= span_s
        sig.compute_pct /= span_s
        sig.spin_pct /= span_s
    sig.hot_label = hot_label(labels, native_labels)
    if not sig.hot_label and alive:  # one sample: name the frame the main thread is in
        last_main = main_thread(alive[-1][1])
        sig.hot_label = thread_wait(bundle, last_main).label if last_main else ""
    sig.spin_label = max(spin_labels, key=lambda k: spin_labels[k]) if spin_labels else ""


def _window(
    bundle: Bundle,
    sig: ProcSignals,
    alive: List[Tuple[float, ProcessSample]],
    clk: int,
    loops: Dict[int, PollLoop],
) -> None:
    """What the first and last live samples say: the main thread's wait now, stopped or not,
    memory, I/O, reaped children, served bytes, threads waiting on locks or timers."""
    first, last = alive[0][1], alive[-1][1]
    sig.window_s = max(0.0, alive[-1][0] - alive[0][0])
    main = main_thread(last)
    sig.main_wait = rank_wait(bundle, sig.info, main) if main else None
    sig.poll = loops.get(main.tid) if main else None
    if sig.poll is not None:
        sig.main_wait = sig.poll.wait
    # Two samples at least: py-spy's attach shows as a brief tracing stop ("t").
    sig.stopped = len(alive) >= 2 and all(ps.state in ("T", "t") for _, ps in alive)
    # A tracer holds it (gdb, strace, a hung py-spy: "t" in every sample): SIGCONT does not
    # resume it, only the tracer does. Frozen by its cgroup (docker pause, Slurm suspend: every
    # thread in the freezer's wait): as stopped, thawed not continued.
    sig.traced = sig.stopped and all(ps.state == "t" for _, ps in alive)
    sig.frozen = len(alive) >= 2 and all(_frozen(ps) for _, ps in alive)
    sig.stopped = sig.stopped or sig.frozen
    sig.rss_last_bytes = last.rss_bytes
    if sig.window_s > 0:
        reaped = max(0, last.children_ticks - first.children_ticks)
        sig.reaped_children_pct = reaped * 100.0 / clk / sig.window_s
    sig.rss_delta_bytes = last.rss_bytes - first.rss_bytes
    if first.io is not None and last.io is not None:
        sig.read_delta_bytes = max(0, last.io.rchar - first.io.rchar)
        sig.write_delta_bytes = max(0, last.io.wchar - first.io.wchar)
        sig.write_calls_delta = max(0, last.io.syscw - first.io.syscw)
    _served(sig, first, last)
    sig.short_requests = short_requests(alive)
    sig.thread_names = tuple(sorted({t.name for t in last.threads if t.name}))
    sig.file_progress_bytes = _file_progress(first, last)
    samples = [ps for _, ps in alive]
    sig.self_blocked = _self_blocked(samples) or alone_on_own_queue(bundle, samples)
    sig.lock_waiters = _lock_waiters(bundle, [ps for _, ps in alive])
    sig.timer_threads = _timer_threads(bundle, first, last)


def _collective_spin(
    bundle: Bundle, info: ProcessInfo, alive: List[ProcessSample], loops: Dict[int, PollLoop]
) -> None:
    """A declared rank's main thread busy-polling a collective in flight: its poll loop."""
    main = main_thread(alive[-1]) if alive else None
    multi_rank = _rank_of_many(info)
    if main is None or main.tid in loops or not multi_rank:
        return
    found = collective_spin(bundle, alive, main.tid)
    if found is not None:
        loops[main.tid] = found


def _rank_of_many(info: ProcessInfo) -> bool:
    return info.rank is not None and (info.world_size or 0) > 1


def _native_spins(
    bundle: Bundle, alive: List[ProcessSample], loops: Dict[int, PollLoop], rank: bool
) -> Dict[int, NativeSpin]:
    """Threads spinning in a communication library's progress engine (an MPI receive polling
    in ``opal_progress``, UCX's worker progress, a CUDA synchronize; the packs name them):
    their CPU is the wait for a message, as a Python poll loop's is - a peer wait, so ranks
    that all sit there are deadlocked, not slow. Outranks a loop read as polling for work
    (``sched_yield`` in the engine looks like one), never a peer wait found already.
    Returns the spins it found, by thread."""
    found: Dict[int, NativeSpin] = {}
    if len(alive) < 2:
        return found
    located = {t.tid for ps in alive for t in ps.threads if t.native is not None}
    if not located:
        return found
    by_tid = [{t.tid: t for t in ps.threads} for ps in alive]
    serves = not rank and any(ps.listen_ports or ps.served for ps in alive)
    for tid in sorted(located):
        have = loops.get(tid)
        if have is not None and family(have.wait.kind) == PEER:
            continue
        series = [m.get(tid) for m in by_tid]
        spin = native_spin(series)
        if spin is None:
            continue
        last = series[-1]
        frames = frames_of(bundle, last.stack_id) if last is not None else ()
        caller = frames[0].name if frames else ""
        # A busy-wait told only by its code (no pack's engine) in a process that listens
        # polls for what a client writes (an RDMA queue, a ring it set up for one): a
        # server's wait, not a peer's - unless it is a rank of several (rank 0 listens for
        # its peers: the c10d store).
        kind: WaitKind = "poll" if not spin.framework and serves else "collective"
        wait = ThreadWait(kind, spin.label(), caller, timed=None, native=True)
        loops[tid] = PollLoop(wait=wait, markers=("completion",), samples=len(alive))
        found[tid] = spin
    return found


FUTEX_PRIVATE = 0x80


def _self_blocked(alive: List[ProcessSample]) -> bool:
    if len(alive) < 2 or any(ps.listen_ports for ps in alive):
        return False
    stacks: Dict[int, Optional[str]] = {}
    for ps in alive:
        if not ps.threads or not any(t.stack_id for t in ps.threads):
            return False
        for t in ps.threads:
            blocked = (
                t.state == "S"
                and t.syscall == "futex"
                and t.futex_op is not None
                and t.futex_op & FUTEX_PRIVATE
                and t.wait_timed is False
            )
            if not blocked or stacks.setdefault(t.tid, t.stack_id) != t.stack_id:
                return False
    return True


def _file_progress(first: ProcessSample, last: ProcessSample) -> int:
    def done(ps: ProcessSample) -> Dict[Tuple[str, str], int]:
        out: Dict[Tuple[str, str], int] = {}
        for f in ps.open_files:
            got = f.resident_bytes if f.kind == "mmap" else f.pos_bytes
            if f.kind != "write" and got is not None:
                key = (f.path, "mmap" if f.kind == "mmap" else "read")
                out[key] = max(out.get(key, 0), got)
        return out

    before, after = done(first), done(last)
    return sum(max(0, got - before.get(key, 0)) for key, got in after.items())


def _served(sig: ProcSignals, first: ProcessSample, last: ProcessSample) -> None:
    """Traffic on client connections between the first and last sample, and the requests
    still unanswered at the last one that were already waiting before the first."""
    before = {c.inode: c for c in first.served}
    moved = 0
    for c in last.served:
        old = before.get(c.inode)
        delta = c.bytes_in + c.bytes_out - ((old.bytes_in + old.bytes_out) if old else 0)
        if c.internal:
            sig.internal_served_bytes[c.port] = sig.internal_served_bytes.get(c.port, 0) + delta
        else:
            moved += delta
    sig.served_delta_bytes = max(0, moved)
    outside = [c for c in last.served if not c.internal]
    sig.served_conns = len(outside) + last.served_more
    window_ms = sig.window_s * 1000.0
    for c in last.served:
        if c.internal:
            sig.internal_conns[c.port] = sig.internal_conns.get(c.port, 0) + 1
    sig.internal_stale = [
        (c.port, c.recv_age_ms / 1000.0)
        for c in last.served
        if c.internal and c.pending and window_ms > 0 and c.recv_age_ms >= window_ms
    ]
    stale = [c for c in outside if c.pending and window_ms > 0 and c.recv_age_ms >= window_ms]
    sig.stale_requests = len(stale)
    sig.stale_age_s = max((c.recv_age_ms for c in stale), default=0) / 1000.0
    sig.stale_ports = tuple(sorted({c.port for c in stale}))


def _lock_waiters(
    bundle: Bundle, alive: List[ProcessSample]
) -> List[Tuple[int, Optional[str], str]]:
    """Threads blocked on a lock in user code in every sample: (tid, futex address, frame).

    A thread parked in ``Condition.wait`` of a queue is a worker waiting for work; one parked
    in user code on a futex (``with lock_b:``) that never moves is half of a lock cycle. A
    thread in ``join`` only waits for such threads, so it is left out; so is one whose futex
    is inside an installed package's native code (``is_installed_plumbing``).
    """
    last = alive[-1]
    stable: Dict[int, Tuple[Optional[str], Optional[str]]] = {
        t.tid: (t.stack_id, t.futex_addr) for t in last.threads
    }
    for ps in alive[:-1]:
        for t in ps.threads:
            if t.tid in stable and stable[t.tid] != (t.stack_id, t.futex_addr):
                del stable[t.tid]
    out: List[Tuple[int, Optional[str], str]] = []
    for t in last.threads:
        if t.tid not in stable or t.stack_id is None:
            continue
        tw = thread_wait(bundle, t)
        if not (tw.kind == "lock" or (tw.kind == "blocked" and t.futex_addr)):
            continue
        frames = frames_of(bundle, t.stack_id)
        if tw.native and frames and is_installed_plumbing(frames[0]):
            # A futex inside a package's native code (Ray's GCS subscriber, gRPC, ZeroMQ
            # poll in C++): a condition its own native threads signal, not a Python lock -
            # two of them on two futexes are no lock cycle.
            continue
        out.append((t.tid, t.futex_addr, tw.label))
    return out


# The kernel functions a task frozen by its cgroup sleeps in: cgroup v1's freezer
# (``__refrigerator``, state D) and cgroup v2's (``do_freezer_trap``).
FREEZER_WCHANS = frozenset({"__refrigerator", "do_freezer_trap"})


def _frozen(ps: ProcessSample) -> bool:
    return bool(ps.threads) and all(t.wchan in FREEZER_WCHANS for t in ps.threads)


def _timer_threads(bundle: Bundle, first: ProcessSample, last: ProcessSample) -> int:
    """Python threads besides the main one that will act again by themselves: asleep, in a
    wait with a timeout, or woken during the capture (a heartbeat, a periodic flusher). A
    process with one is a daemon between ticks, not a process nobody can wake."""
    main = main_thread(last)
    before = {t.tid: t.voluntary_ctxt_switches for t in first.threads}
    count = 0
    for t in last.threads:
        if t.stack_id is None or (main is not None and t.tid == main.tid):
            continue
        tw = thread_wait(bundle, t)
        woke = (t.voluntary_ctxt_switches or 0) > (before.get(t.tid) or 0) and first is not last
        if tw.kind == "sleep" or tw.timed is True or woke:
            count += 1
    return count
