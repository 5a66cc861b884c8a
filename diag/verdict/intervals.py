"""One interval's deltas of one process (``interval_deltas``): where its CPU went between two
samples - compute or spin, by thread, by the frame it burns in - whether its main thread moved
or wanted a CPU, its wakeups. ``diag.verdict.features`` adds them up over the series.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from diag.model import Bundle, ProcessSample, ThreadSample, main_thread
from diag.verdict.polling import PollLoop
from diag.verdict.signals import COMPUTE_PCT, ProcSignals
from diag.verdict.thread_wait import ThreadWait, thread_wait
from diag.verdict.waits import PEER, family

__all__ = ["hot_label", "interval_deltas", "proc_ticks", "thread_ticks"]


def thread_ticks(t: ThreadSample) -> int:
    return t.utime_ticks + t.stime_ticks


# The share of an interval a main thread wanted a CPU for - ran, or waited runnable in the
# run queue (schedstat) - at which it is CPU-bound whatever share the host gave it.
CPU_DEMAND_SHARE = 0.5
# ... and it must have run: ticks are charged whole, so two at least (one is quantisation).
MIN_RAN_TICKS = 2


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
    ran = thread_ticks(main_b) - thread_ticks(main_a)
    if ran < MIN_RAN_TICKS:  # wanted a CPU and got none: the machine holds it (``machine``)
        return False
    wanted_s = ran / clk + (b - a) / 1e9
    if wanted_s < CPU_DEMAND_SHARE * dt_s:
        return False
    return thread_wait(bundle, main_b).kind is None


def interval_deltas(
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
        pct = max(0, thread_ticks(t) - thread_ticks(prev) - 1) * 100.0 / clk / dt_s
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
    total = max(0, proc_ticks(b) - proc_ticks(a)) * 100.0 / clk / dt_s
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


def proc_ticks(ps: ProcessSample) -> int:
    return ps.utime_ticks + ps.stime_ticks


def hot_label(py_labels: Dict[str, float], native_labels: Dict[str, float]) -> str:
    """The frame compute burns in; a Python frame unless native threads dominate by far
    (gloo's TCP loop burns more than the training step that drives it)."""
    best_py = max(py_labels, key=lambda k: py_labels[k]) if py_labels else ""
    best_native = max(native_labels, key=lambda k: native_labels[k]) if native_labels else ""
    if best_py and (not best_native or py_labels[best_py] >= native_labels[best_native] / 4):
        return best_py
    return best_native
