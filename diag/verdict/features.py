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

import copy
from dataclasses import dataclass, field, fields
from typing import Dict, Hashable, List, Optional, Tuple

from diag.frames import is_installed_plumbing
from diag.model import Bundle, ProcessInfo, ProcessSample, ThreadSample, main_thread
from diag.text.roles import framework_role, named
from diag.verdict.native_waits import native_spin
from diag.verdict.polling import PollLoop, PollMemo, collective_spin, poll_loops
from diag.verdict.proc_classes import class_key, record_classes
from diag.verdict.short_requests import ShortRequests, short_requests
from diag.verdict.thread_wait import (
    ThreadWait,
    alone_on_own_queue,
    frames_of,
    rank_wait,
    thread_wait,
)
from diag.verdict.waits import PEER, family

__all__ = ["ProcSignals", "ThreadWait", "extract", "frames_of", "thread_wait"]

DEAD_STATUSES = ("zombie", "exited")
COMPUTE_PCT = 10.0  # % of one core: below this a thread is as good as still


@dataclass
class ProcSignals:
    """Everything the classifier knows about one process across the series."""

    key: Tuple[str, int]
    info: ProcessInfo
    samples: List[int] = field(default_factory=list)  # sample indices where it was seen
    statuses: List[str] = field(default_factory=list)
    dead_since: Optional[int] = None  # first sample index where it was zombie/exited
    exit_code: Optional[int] = None
    intervals: int = 0  # consecutive alive pairs, the number of deltas
    window_s: float = 0.0  # first to last alive sample
    cpu_pct: float = 0.0  # mean % of one core over the window
    compute_pct: float = 0.0
    spin_pct: float = 0.0
    compute_intervals: int = 0  # intervals with compute >= COMPUTE_PCT
    # Intervals whose main thread wanted a CPU most of the time (ran or waited runnable),
    # outside any known wait and poll loop: it computes whenever the host gives it a CPU - on
    # a saturated host at a share under COMPUTE_PCT, still work, not a wait.
    runnable_intervals: int = 0
    hot_label: str = ""  # the frame where compute burns most
    spin_label: str = ""
    main_wait: Optional[ThreadWait] = None  # main thread at the last alive sample
    main_stack_ids: List[Optional[str]] = field(default_factory=list)
    # The frame the main thread waited in at each alive sample ("" where it worked).
    main_wait_labels: List[str] = field(default_factory=list)
    main_moved: int = 0  # intervals where the main thread's stack changed
    stacks_moved: int = 0  # thread-intervals where any Python stack changed
    rss_delta_bytes: int = 0
    rss_last_bytes: int = 0
    read_delta_bytes: int = 0  # rchar: every read(), page cache included
    write_delta_bytes: int = 0  # wchar: pipes, sockets, files
    write_calls_delta: int = 0  # syscw: write()-family calls over the window
    listen_ports: Tuple[int, ...] = ()
    lock_waiters: List[Tuple[int, Optional[str], str]] = field(default_factory=list)
    main_wakeups: int = 0  # voluntary context switches of the main thread
    timer_threads: int = 0  # other Python threads that sleep, wait with a timeout, or woke
    py_ok: bool = False
    stopped: bool = False  # state T/t (SIGSTOP, a debugger) in every alive sample, or frozen
    traced: bool = False  # ... in state t every time: held by a tracer, not by SIGSTOP
    frozen: bool = False  # every thread in its cgroup freezer's wait in every alive sample
    # CPU of the children it reaped during the window (cutime + cstime), % of one core:
    # compilers and other short-lived helpers that no sample may catch alive.
    reaped_children_pct: float = 0.0
    # Bytes its clients' connections moved (both ways), from tcp_info: served requests.
    served_delta_bytes: int = 0
    # Bytes a loader got through its big files during the window: read() offsets (fdinfo
    # pos) and resident pages of mapped files - an mmap loader's page faults are no rchar.
    file_progress_bytes: int = 0
    # Every thread, in every sample, blocked without timeout on a private futex (op & 0x80:
    # a lock, queue, event of this process) with an unchanged stack: only a thread of this
    # process could end any of those waits, and all of them wait. It cannot wake by itself.
    self_blocked: bool = False
    served_conns: int = 0  # client connections open at the last sample (outside the job)
    # Connections to its ports accepted and closed between samples (TIME_WAIT): requests too
    # short for any sample to see (``diag.verdict.short_requests``).
    short_requests: Optional[ShortRequests] = None
    # Requests from outside the job that arrived before the window and got no answer in it.
    stale_requests: int = 0
    stale_age_s: float = 0.0  # the oldest of them: seconds since its data arrived
    stale_ports: Tuple[int, ...] = ()
    # The main thread polled in every sample (``diag.verdict.polling``): its CPU is the wait
    # it polls on, not work, and ``main_wait`` is that wait.
    poll: Optional[PollLoop] = None
    # Client connections from the job's own processes (``ServedConn.internal``), by port:
    # bytes moved over the window, and (port, age s) of requests unanswered through it. A
    # harness or an RL loop calling the job's own server - or a framework's RPC channel:
    # ``diag.verdict.work`` tells which by the port and the server.
    internal_served_bytes: Dict[int, int] = field(default_factory=dict)
    internal_stale: List[Tuple[int, float]] = field(default_factory=list)
    internal_conns: Dict[int, int] = field(default_factory=dict)  # port -> open at the end
    thread_names: Tuple[str, ...] = ()  # its threads' names (comm) at the last alive sample
    # Processes of one class read the same in every field of every sample but who they are
    # (``proc_classes``): a finder's "nothing here" for one holds for all. None: unknown.
    series_class: Optional[int] = None

    @property
    def pid(self) -> int:
        return self.key[1]

    @property
    def rank(self) -> Optional[int]:
        return self.info.rank

    @property
    def dead(self) -> bool:
        return self.dead_since is not None

    @property
    def main_family(self) -> Optional[str]:
        return family(self.main_wait.kind) if self.main_wait else None

    @property
    def name(self) -> str:
        """How sentences name it: by its framework's title when it has one ("scheduler TP1",
        "detokenizer (pid 2206)"), else "rank 3" / "pid 4242" - as ``wording.who`` does."""
        role = framework_role(self.info.cmdline, self.info.name)
        if role is not None:
            return named(role, self.rank, self.pid)
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"


def _ticks(t: ThreadSample) -> int:
    return t.utime_ticks + t.stime_ticks


def _series(bundle: Bundle) -> Dict[Tuple[str, int], List[Tuple[int, float, ProcessSample]]]:
    out: Dict[Tuple[str, int], List[Tuple[int, float, ProcessSample]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            out.setdefault((ps.host, ps.pid), []).append((sample.index, ps.t_s or sample.t_s, ps))
    return out


# The share of an interval a main thread wanted a CPU for - ran, or waited runnable in the
# run queue (schedstat) - at which it is CPU-bound whatever share the host gave it.
CPU_DEMAND_SHARE = 0.5


def _runs_when_it_can(
    bundle: Bundle,
    main_a: Optional[ThreadSample],
    main_b: Optional[ThreadSample],
    loops: Dict[int, PollLoop],
    dt_s: float,
    clk: int,
) -> bool:
    """The main thread wanted a CPU for most of the interval - its CPU time plus its
    run-queue delay (``run_delay_ns``) over ``CPU_DEMAND_SHARE`` of it - runnable at its end,
    in no poll loop and no known wait: it computes whenever the host lets it. On a saturated
    host a CPU-bound DataLoader worker got 8 % of a core (under ``COMPUTE_PCT``) and spent the
    rest of the interval in the run queue; an idle worker woken at the sample wants ~2 %."""
    if main_a is None or main_b is None or main_b.tid in loops or dt_s <= 0:
        return False
    a, b = main_a.run_delay_ns, main_b.run_delay_ns
    if main_b.state != "R" or a is None or b is None:
        return False
    wanted_s = (_ticks(main_b) - _ticks(main_a)) / clk + (b - a) / 1e9
    if wanted_s < CPU_DEMAND_SHARE * dt_s:
        return False
    return thread_wait(bundle, main_b).kind is None


def _interval(
    bundle: Bundle,
    sig: ProcSignals,
    a: ProcessSample,
    b: ProcessSample,
    dt_s: float,
    clk: int,
    compute_labels: Tuple[Dict[str, float], Dict[str, float]],
    spin_labels: Dict[str, float],
    loops: Dict[int, PollLoop],
) -> None:
    """Add one interval's CPU, stack and wakeup deltas to ``sig``. A thread in a poll loop
    (``loops``) spins whatever its stack does: asking for work that is not there is no work."""
    labels, native_labels = compute_labels
    before = {t.tid: t for t in a.threads}
    main_b = main_thread(b)
    main_a = before.get(main_b.tid) if main_b else None
    main_wait, main_peer_still = _main_waits_on(bundle, main_a, main_b, loops)
    compute = spin = 0.0
    for t in b.threads:
        prev = before.get(t.tid)
        if prev is None:
            continue
        # Ticks are charged whole: one tick may be a fraction of a millisecond of CPU, which
        # over a short interval would read as a busy thread. Count a thread's CPU one tick
        # short (nothing over a long interval, a quantisation artefact over a short one).
        pct = max(0, _ticks(t) - _ticks(prev) - 1) * 100.0 / clk / dt_s
        moved = t.stack_id is not None and prev.stack_id != t.stack_id
        if moved:
            sig.stacks_moved += 1
        # A thread that burnt nothing adds only a zero label, and a zero label added after
        # another can never be the hottest (ties go to the first): skip reading its wait,
        # which at 4,096 ranks x 300 mostly idle threads is most of the classify time.
        if pct == 0 and spin_labels and (labels if t.stack_id is not None else native_labels):
            continue
        loop = loops.get(t.tid)
        tw = loop.wait if loop else thread_wait(bundle, t)
        # A native thread follows its main thread: spinning while that one waits on a peer -
        # unless it spins in a progress engine itself (NCCL's proxy, a UCX progress thread).
        engine = loop is not None and loop.wait.native
        if t.stack_id is None:
            is_spin = main_peer_still or engine
        else:
            is_spin = loop is not None or (tw.kind is not None and not moved)
        if is_spin:
            spin += pct
            follows = main_wait is not None and t.stack_id is None and not engine
            label = main_wait.label if main_wait is not None and follows else tw.label
            spin_labels[label] = spin_labels.get(label, 0.0) + pct
        else:
            compute += pct
            label = (tw.caller or tw.label) if tw.kind is not None else tw.label
            into = labels if t.stack_id is not None else native_labels
            into[label] = into.get(label, 0.0) + pct
    total = max(0, _proc_ticks(b) - _proc_ticks(a)) * 100.0 / clk / dt_s
    # Weighted by the interval's length: a late sample leaves a short interval and a long one,
    # and the mean over the window is CPU time over wall time, not a mean of rates.
    sig.cpu_pct += total * dt_s
    sig.compute_pct += compute * dt_s
    sig.spin_pct += spin * dt_s
    if compute >= COMPUTE_PCT:
        sig.compute_intervals += 1
    if _runs_when_it_can(bundle, main_a, main_b, loops, dt_s, clk):
        sig.runnable_intervals += 1
    if main_a is not None and main_b is not None:
        _main_motion(sig, a, main_a, main_b)


def _main_waits_on(
    bundle: Bundle,
    main_a: Optional[ThreadSample],
    main_b: Optional[ThreadSample],
    loops: Dict[int, PollLoop],
) -> Tuple[Optional[ThreadWait], bool]:
    """The main thread's wait at the interval's end, and whether it sat in one peer wait (or
    a poll loop) across it: then its native threads burn for that wait, not for work."""
    main_loop = loops.get(main_b.tid) if main_b else None
    main_wait = main_loop.wait if main_loop else (thread_wait(bundle, main_b) if main_b else None)
    main_still = main_a is not None and main_b is not None and main_a.stack_id == main_b.stack_id
    peer_still = main_still and main_wait is not None and family(main_wait.kind) == PEER
    if not peer_still and main_a is not None and main_wait is not None:
        # The same peer wait at both ends, on another line of it (gloo's broadcast waits on
        # the size, then on the data): its native threads move that collective's bytes.
        before_wait = thread_wait(bundle, main_a)
        peer_still = family(main_wait.kind) == PEER and before_wait.label == main_wait.label
    # Native threads of a poll loop (ZeroMQ's I/O threads, gloo's loop moving the empty
    # batch) burn for the loop: spin too.
    return main_wait, peer_still or main_loop is not None


def _main_motion(
    sig: ProcSignals, a: ProcessSample, main_a: ThreadSample, main_b: ThreadSample
) -> None:
    """Did the main thread's stack change over the interval, and how often did it wake."""
    if main_a.stack_id != main_b.stack_id:
        sig.main_moved += 1
    if main_a.voluntary_ctxt_switches is not None and main_b.voluntary_ctxt_switches:
        # py-spy's blocking dump (Python < 3.11) stops and resumes every thread right after
        # the /proc read at ``a``: two voluntary switches that are diag's, not a wakeup.
        paused = 2 if a.stack_reader == "py-spy" and not a.stacks_reused else 0
        sig.main_wakeups += max(
            0, main_b.voluntary_ctxt_switches - main_a.voluntary_ctxt_switches - paused
        )


def _proc_ticks(ps: ProcessSample) -> int:
    return ps.utime_ticks + ps.stime_ticks


def _hot(py_labels: Dict[str, float], native_labels: Dict[str, float]) -> str:
    """The frame compute burns in; a Python frame unless native threads dominate by far
    (gloo's TCP loop burns more than the training step that drives it)."""
    best_py = max(py_labels, key=lambda k: py_labels[k]) if py_labels else ""
    best_native = max(native_labels, key=lambda k: native_labels[k]) if native_labels else ""
    if best_py and (not best_native or py_labels[best_py] >= native_labels[best_native] / 4):
        return best_py
    return best_native


def extract(bundle: Bundle) -> List[ProcSignals]:
    """One ``ProcSignals`` per process seen in any sample, in first-seen order."""
    infos = {(p.host, p.pid): p for p in bundle.processes}
    clk = bundle.host.clk_tck or 100
    out: List[ProcSignals] = []
    memo: PollMemo = {}  # poll loops by a thread's samples, across processes
    # Processes whose series read the same (``proc_classes``): computed once a class.
    classes: Dict[Hashable, ProcSignals] = {}
    for key, series in _series(bundle).items():
        info = infos.get(key, ProcessInfo(pid=key[1], host=key[0]))
        class_of = class_key(series, info)
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
    _collective_spin(bundle, info, [ps for _, ps in alive], loops)
    _native_spins(bundle, [ps for _, ps in alive], loops)
    _rates(bundle, sig, alive, clk, loops)
    if alive:
        _window(bundle, sig, alive, clk, loops)
    return sig


def _member(same: ProcSignals, key: Tuple[str, int], info: ProcessInfo) -> ProcSignals:
    """Another process of ``same``'s class: its features, its own identity, and containers
    of its own (a later step that edits one process's lists must not edit its class's)."""
    out = copy.copy(same)
    out.key, out.info = key, info
    for f in fields(out):
        value = getattr(out, f.name)
        if isinstance(value, (list, dict)):
            setattr(out, f.name, type(value)(value))
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
        _interval(bundle, sig, a, b, dt_s, clk, (labels, native_labels), spin_labels, loops)
    if span_s > 0:
        sig.cpu_pct /= span_s
        sig.compute_pct /= span_s
        sig.spin_pct /= span_s
    sig.hot_label = _hot(labels, native_labels)
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
    multi_rank = info.rank is not None and (info.world_size or 0) > 1
    if main is None or main.tid in loops or not multi_rank:
        return
    found = collective_spin(bundle, alive, main.tid)
    if found is not None:
        loops[main.tid] = found


def _native_spins(bundle: Bundle, alive: List[ProcessSample], loops: Dict[int, PollLoop]) -> None:
    """Threads spinning in a communication library's progress engine (an MPI receive polling
    in ``opal_progress``, UCX's worker progress, a CUDA synchronize; the packs name them):
    their CPU is the wait for a message, as a Python poll loop's is - a peer wait, so ranks
    that all sit there are deadlocked, not slow. Outranks a loop read as polling for work
    (``sched_yield`` in the engine looks like one), never a peer wait found already."""
    if len(alive) < 2:
        return
    located = {t.tid for ps in alive for t in ps.threads if t.native is not None}
    if not located:
        return
    by_tid = [{t.tid: t for t in ps.threads} for ps in alive]
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
        wait = ThreadWait("collective", spin.label(), caller, timed=None, native=True)
        loops[tid] = PollLoop(wait=wait, markers=("completion",), samples=len(alive))


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
