"""The machine as the cause: a process held back from the CPU - throttled by its cgroup's
limit, starved at a low priority, or waiting on a crowded run queue - is slow, never blocked.

Why: a rank under a limit of a few hundredths of a core is runnable (state R) in every sample,
burns almost nothing and writes nothing for seconds; read from stacks and CPU alone it is the
odd rank out, "diverged; no CPU, I/O or log progress: kill the job". The kernel says otherwise:
its group's ``cpu.stat`` counts the periods it was throttled in, and its threads' run-queue
delay (``schedstat``) grows while they wait for a CPU. One definition each, read by the rule
table (``rules.machine``), the report's machine section and the test over every recorded
bundle:

- ``runnable_moving``: a process with a thread the kernel reports runnable whose run-queue
  delay grew faster than its CPU time (it waits for a CPU more than it runs), or whose stack
  moved while it ran in no known wait or poll loop. Such a thread is not blocked.
- ``cpu_holds`` / ``held_back``: what held each process back over the capture, and whether
  that is the reason it is slow (throttled in at least half of its periods; or at nice >= 10 /
  SCHED_BATCH / SCHED_IDLE, waiting for a CPU at least half the time; or starved, waiting
  more than it runs).

A spinner (CPU burnt in a known wait, a poll loop) is never held back: under a limit it is
throttled too, and that says nothing against the deadlock it spins in.

May import the model and ``diag.verdict`` modules below the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Dict, List, Literal, Optional, Sequence, Set, Tuple

from diag.model import (
    Bundle,
    CpuHoldRecord,
    CpuLimits,
    ProcessSample,
    SchedPolicy,
    ThreadSample,
    main_thread,
)
from diag.model.judged import MAX_CPU_HOLDS
from diag.verdict.evidence import SPIN_PCT
from diag.verdict.features import ProcSignals
from diag.verdict.memory import cause_of as mem_cause
from diag.verdict.memory import mem_holds
from diag.verdict.proc_classes import per_class
from diag.verdict.series_index import process_samples
from diag.verdict.wording import peers_waiting_tail, verb, who

THROTTLED_SHARE = 0.5  # of its scheduling periods, for a limit to be the cause
MIN_PERIODS = 5  # periods elapsed over the capture for a throttle share to mean anything
WAIT_SHARE = 0.5  # of the window spent waiting for a CPU, for a priority or a queue to be
LIMIT_WAIT_SHARE = 0.2  # ... and under a throttling limit (its periods say the rest)
LOW_NICE = 10  # nice values from here are "low priority"
STARVED_MIN_S = 0.1  # run-queue delay that counts as growth at all
LOW_POLICIES: Tuple[SchedPolicy, ...] = ("batch", "idle")

Cause = Literal["limit", "priority", "queue"]
Key = Tuple[str, int]


@dataclass(frozen=True)
class CpuHold:
    """What kept one process from the CPU over the capture (first to last alive sample)."""

    key: Key
    window_s: float
    run_delay_s: float  # the most any one thread of it waited on a run queue
    runnable_samples: int  # samples where its most-waiting thread was in state R
    samples: int
    limits: Optional[CpuLimits]  # the last sample's
    throttled_share: Optional[float]  # of the periods elapsed, those throttled
    throttled_s: Optional[float]

    @property
    def wait_share(self) -> float:
        return self.run_delay_s / self.window_s if self.window_s > 0 else 0.0

    @property
    def low_priority(self) -> bool:
        c = self.limits
        return c is not None and (c.nice >= LOW_NICE or c.policy in LOW_POLICIES)


def _series(bundle: Bundle) -> Dict[Key, List[Tuple[float, ProcessSample]]]:
    out: Dict[Key, List[Tuple[float, ProcessSample]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            if ps.status == "alive":
                out.setdefault((ps.host, ps.pid), []).append((ps.t_s or sample.t_s, ps))
    return out


def _ticks(t: ThreadSample) -> int:
    return t.utime_ticks + t.stime_ticks


def _thread_waits(
    series: Sequence[Tuple[float, ProcessSample]], clk_tck: int, main_only: bool = False
) -> List[Tuple[float, float, int, int]]:
    """Per thread seen in the first and last samples: (run-queue delay grown s, CPU grown s,
    samples in state R, samples seen); ``main_only``: the main thread's alone."""
    first, last = series[0][1], series[-1][1]
    before = {t.tid: t for t in first.threads}
    main = main_thread(last) if main_only else None
    out = []
    for t in last.threads:
        if main_only and (main is None or t.tid != main.tid):
            continue
        b = before.get(t.tid)
        if b is None or b.run_delay_ns is None or t.run_delay_ns is None:
            continue
        states = [x.state for _, ps in series for x in ps.threads if x.tid == t.tid]
        delay_s = max(0, t.run_delay_ns - b.run_delay_ns) / 1e9
        cpu_s = max(0, _ticks(t) - _ticks(b)) / clk_tck
        out.append((delay_s, cpu_s, states.count("R"), len(states)))
    return out


def _throttle(
    series: Sequence[Tuple[float, ProcessSample]],
) -> Tuple[Optional[float], Optional[float]]:
    a, b = series[0][1].cpu_limits, series[-1][1].cpu_limits
    if a is None or b is None or a.limit_group != b.limit_group or b.quota_cores is None:
        return None, None
    if None in (a.nr_periods, b.nr_periods, a.nr_throttled, b.nr_throttled):
        return None, None
    periods = (b.nr_periods or 0) - (a.nr_periods or 0)
    throttled = (b.nr_throttled or 0) - (a.nr_throttled or 0)
    if periods < MIN_PERIODS or throttled < 0:
        return None, None
    secs = None
    if a.throttled_ns is not None and b.throttled_ns is not None:
        secs = max(0, b.throttled_ns - a.throttled_ns) / 1e9
    return min(1.0, throttled / periods), secs


def cpu_holds(bundle: Bundle) -> Dict[Key, CpuHold]:
    """What held each process seen alive in two samples or more back from the CPU."""
    clk = bundle.host.clk_tck or 100
    out: Dict[Key, CpuHold] = {}
    for key, series in _series(bundle).items():
        if len(series) < 2:
            continue
        window_s = series[-1][0] - series[0][0]
        waits = per_class(bundle, "thread_waits", key, partial(_thread_waits, series, clk))
        delay, _, runnable, seen = max(waits, default=(0.0, 0.0, 0, 0))
        share, secs = _throttle(series)
        out[key] = CpuHold(
            key=key,
            window_s=window_s,
            run_delay_s=delay,
            runnable_samples=runnable,
            samples=seen,
            limits=series[-1][1].cpu_limits,
            throttled_share=share,
            throttled_s=secs,
        )
    return out


def starved_keys(bundle: Bundle) -> Set[Key]:
    """Processes whose main thread - the one a verdict says waits or diverged - was runnable
    in at least half the samples and whose run-queue delay grew by more than its CPU time
    (and by ``STARVED_MIN_S`` at least): it waits for a CPU, it is not blocked. Only the main
    thread: on a busy host a rank's background threads (gloo's, NCCL's, a heartbeat) are
    caught runnable now and then, and a rank asleep for ever in ``rebuild_cache`` beside them
    read "runs, slowly: don't kill" - wait on a dead job."""
    clk = bundle.host.clk_tck or 100
    out: Set[Key] = set()
    for key, series in _series(bundle).items():
        if len(series) < 2:
            continue
        main = partial(_thread_waits, series, clk, main_only=True)
        for delay_s, cpu_s, runnable, seen in per_class(bundle, "main_waits", key, main):
            if runnable * 2 >= seen and delay_s >= STARVED_MIN_S and delay_s > cpu_s:
                out.add(key)
                break
    return out


def spins(p: ProcSignals) -> bool:
    """Its CPU goes to a known wait or a poll loop: motion there is no work."""
    return p.spin_pct >= SPIN_PCT or p.poll is not None


def moved_running(bundle: Bundle, p: ProcSignals) -> bool:
    """The main thread of ``p`` in state R in some sample and its Python stack changed between
    two samples, ``p`` spinning in no wait: it runs its own code, however little. (The main
    thread only, as for ``starved_keys``: a background thread that runs says nothing of the
    wait the verdict names.)"""
    if spins(p):
        return False
    seen: Dict[int, List[Tuple[str, Optional[str]]]] = {}
    for ps in process_samples(bundle, *p.key):
        if ps.status == "alive":
            main = main_thread(ps)
            for t in (main,) if main is not None else ():
                seen.setdefault(t.tid, []).append((t.state, t.stack_id))
    for states in seen.values():
        ids = {sid for _, sid in states if sid is not None}
        if len(ids) > 1 and any(state == "R" for state, _ in states):
            return True
    return False


def runnable_moving(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[ProcSignals]:
    """The processes of ``procs`` a verdict must not call blocked, without CPU or deadlocked."""
    starved = starved_keys(bundle)
    return [
        p
        for p in procs
        if not p.dead and ((p.key in starved and not spins(p)) or moved_running(bundle, p))
    ]


def cause_of(hold: CpuHold) -> Optional[Cause]:
    """Why ``hold``'s process is slow, if the machine is why."""
    runnable = hold.runnable_samples * 2 >= max(1, hold.samples)
    if not runnable:
        return None
    share = hold.throttled_share
    if share is not None and share >= THROTTLED_SHARE and hold.wait_share >= LIMIT_WAIT_SHARE:
        return "limit"
    if hold.wait_share >= WAIT_SHARE and hold.low_priority:
        return "priority"
    return None


def held_back(
    holds: Dict[Key, CpuHold], alive: Sequence[ProcSignals]
) -> List[Tuple[ProcSignals, CpuHold, Cause]]:
    """The live processes the machine holds back (a spinner never: see the module's doc);
    ``holds``: ``cpu_holds`` of the bundle (``Situation.cpu_holds``)."""
    out = []
    for p in alive:
        hold = holds.get(p.key)
        if hold is None or p.dead or spins(p):
            continue
        cause = cause_of(hold)
        if cause is not None:
            out.append((p, hold, cause))
    return out


def _limit_text(hold: CpuHold) -> str:
    c = hold.limits
    cores = f"{c.quota_cores:.2f}" if c is not None and c.quota_cores is not None else "?"
    share = f"{(hold.throttled_share or 0) * 100:.0f} %"
    return f"{cores} of a core, throttled in {share} of periods"


def _delay_text(hold: CpuHold) -> str:
    return (
        f"run-queue delay {hold.run_delay_s:.1f} s of {hold.window_s:.1f} s, "
        f"{hold.wait_share * 100:.0f} % of the time"
    )


def _priority_text(hold: CpuHold) -> str:
    c = hold.limits
    what = (
        f"nice {c.nice}"
        if c is not None and c.nice >= LOW_NICE
        else "SCHED_" + (c.policy.upper() if c is not None else "?")
    )
    return f"{what}, {_delay_text(hold)}"


def held_sentence(
    held: Sequence[Tuple[ProcSignals, CpuHold, Cause]],
    alive: Sequence[ProcSignals],
    host_note: str = "",
) -> str:
    """ "slow: rank 1 is throttled by its cgroup's CPU limit (0.03 of a core, throttled in
    99 % of periods); ranks 0, 2 wait for it in `all_reduce` - raise the limit; don't kill"."""
    parts = []
    limited = [x for x in held if x[2] == "limit"]
    low = [x for x in held if x[2] == "priority"]
    if limited:
        procs = [p for p, _, _ in limited]
        parts.append(
            f"{who(procs)} {verb(procs, 'is', 'are')} throttled by "
            f"{verb(procs, 'its', 'their')} cgroup's CPU limit ({_limit_text(limited[0][1])})"
        )
    if low:
        procs = [p for p, _, _ in low]
        parts.append(
            f"{who(procs)} {verb(procs, 'waits', 'wait')} for a CPU at a low priority "
            f"({_priority_text(low[0][1])}{host_note})"
        )
    tail = peers_waiting_tail([p for p, _, _ in held], alive)
    remedy = []
    if limited:
        remedy.append("raise the limit")
    if low:
        remedy.append("give it a CPU (renice it, or move what competes)")
    return f"{'; '.join(parts)}{tail} - {', '.join(remedy)}; don't kill"


def host_note(bundle: Bundle) -> str:
    """ "; the host's load 6.2 on 2 cores" from the last sample that read it, or ""."""
    for sample in reversed(bundle.samples):
        h = sample.host_load
        if h is not None and h.cpus:
            return f"; the host's load {h.load1:.1f} on {h.cpus} core{'s' if h.cpus != 1 else ''}"
    return ""


def _motion(p: ProcSignals, hold: Optional[CpuHold]) -> str:
    """ "runnable in 3 of 3 samples, its stack moved in 2 of 2 intervals, run-queue delay
    2.1 s of 4.0 s, 52 % of the time"."""
    parts = []
    if hold is not None and hold.samples:
        parts.append(f"runnable in {hold.runnable_samples} of {hold.samples} samples")
    if p.main_moved:
        parts.append(f"its stack moved in {p.main_moved} of {p.intervals} intervals")
    if hold is not None and hold.run_delay_s >= STARVED_MIN_S:
        parts.append(_delay_text(hold))
    return ", ".join(parts) or "runnable, its stack moving"


def runs_sentence(
    moving: Sequence[ProcSignals],
    holds: Dict[Key, CpuHold],
    alive: Sequence[ProcSignals],
    host_note: str = "",
) -> str:
    """ "slow: rank 1 runs, slowly (runnable in 3 of 3 samples, ...): ranks 0, 2 wait for it
    in `all_reduce` - runnable is not blocked: wait, or look at what keeps it from a CPU"."""
    first = moving[0]
    tail = peers_waiting_tail(moving, alive)
    return (
        f"{who(moving)} {verb(moving, 'runs', 'run')}, slowly "
        f"({_motion(first, holds.get(first.key))}{host_note}){tail} - the kernel reports "
        f"{verb(moving, 'it', 'them')} runnable, not blocked: wait, or give "
        f"{verb(moving, 'it', 'them')} more CPU; don't kill"
    )


def runs_reason(p: ProcSignals, holds: Dict[Key, CpuHold]) -> str:
    return f"runnable, not blocked: {_motion(p, holds.get(p.key))}"


def suspect_reason(hold: CpuHold, cause: Cause) -> str:
    if cause == "limit":
        return f"throttled by its cgroup's CPU limit: {_limit_text(hold)}"
    return f"waits for a CPU at a low priority: {_priority_text(hold)}"


def hold_records(
    bundle: Bundle, procs: Sequence[ProcSignals], holds: Callable[[], Dict[Key, CpuHold]]
) -> Tuple[CpuHoldRecord, ...]:
    """The verdict's record of what kept each process from the CPU (the report's machine
    section reads it): held back first, then by rank; () for a bundle written before the CPU
    limits were read (its JSON stays as it was). ``holds``: ``cpu_holds`` of the bundle, read
    only when needed (``Situation.cpu_holds``)."""
    if not any(p.cpu_limits is not None for s in bundle.samples for p in s.processes):
        return ()
    held = holds()
    mems = mem_holds(bundle)
    out = []
    for p in procs:
        hold = held.get(p.key)
        if hold is None:
            continue
        cause = "" if spins(p) else (cause_of(hold) or "")
        mem = mems.get(p.key)
        c = mem.limits if mem is not None else None
        out.append(
            CpuHoldRecord(
                pid=p.pid,
                host=p.key[0],
                rank=p.rank,
                window_s=round(hold.window_s, 3),
                run_delay_s=round(hold.run_delay_s, 3),
                runnable_samples=hold.runnable_samples,
                samples=hold.samples,
                throttled_share=(
                    round(hold.throttled_share, 4) if hold.throttled_share is not None else None
                ),
                throttled_s=round(hold.throttled_s, 3) if hold.throttled_s is not None else None,
                cause=cause,
                mem_usage_bytes=c.usage_bytes if c is not None else None,
                mem_limit_bytes=c.limit_bytes if c is not None else None,
                mem_limit_events=mem.limit_events if mem is not None else 0,
                major_faults_per_s=round(mem.faults_per_s, 1) if mem is not None else 0.0,
                reclaim_samples=mem.reclaim_samples if mem is not None else 0,
                mem_pressure=mem is not None and mem_cause(mem),
            )
        )
    out.sort(key=lambda r: (not (r.cause or r.mem_pressure), r.rank is None, r.rank or 0, r.pid))
    return tuple(out[:MAX_CPU_HOLDS])


__all__ = [
    "CpuHold",
    "cause_of",
    "cpu_holds",
    "held_back",
    "held_sentence",
    "hold_records",
    "host_note",
    "moved_running",
    "runnable_moving",
    "runs_reason",
    "runs_sentence",
    "starved_keys",
    "suspect_reason",
]
