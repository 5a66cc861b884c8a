"""The machine as the cause, memory: a process thrashing against its memory cgroup's limit -
its pages evicted and read back, its threads stalled in reclaim - is slow, never hung.

Why: at its limit a rank's page cache (the weights it maps, the files it reads) is evicted as
fast as it is read back; its threads wait in the kernel (a major fault's read, direct reclaim,
compaction) and its log goes quiet. From stacks and CPU it is a rank that does nothing. The
kernel counts it (``diag.probes.cgroup_mem``, per-thread ``majflt``, wait channels):

- ``mem_holds``: per process over the capture - its group's usage against its limit, the
  limit events that grew (v1 ``failcnt``, v2 ``memory.events`` high/max), the major faults per
  second (its threads' ``majflt``, or the group's ``pgmajfault``), the samples where a thread
  waited in reclaim or compaction (its wchan), memory pressure (v2 group, host);
- ``cause_of``: under memory pressure when it faults or reclaims (``MIN_FAULTS_PER_S``, or a
  reclaim wait in a sample) *and* the memory is short - its group at ``FULL_SHARE`` of its
  limit with limit events growing, or pressure at ``PRESSURE_PCT``. A loader faulting in its
  weights through mmap faults too, with room to spare: that is its load, not pressure.

An OOM kill already in evidence stays a death: the death rows decide before this one, and a
group whose ``oom_kill`` count grew is said in the sentence.

May import the model and ``diag.verdict`` modules below the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple

from diag.model import Bundle, MemLimits, ProcessSample
from diag.text.units import size
from diag.verdict.features import ProcSignals
from diag.verdict.proc_classes import per_class
from diag.verdict.wording import peers_waiting_tail, verb, who

FULL_SHARE = 0.9  # of its limit in use
MIN_FAULTS_PER_S = 20.0
PRESSURE_PCT = 10.0  # some avg10
# Wait channels of a thread in reclaim, compaction or writeback throttling.
RECLAIM_WCHANS = (
    "shrink_",
    "try_to_free",
    "reclaim",
    "compact",
    "mem_cgroup_handle_over_high",
    "balance_dirty_pages",
    "throttle_direct",
)

Key = Tuple[str, int]


@dataclass(frozen=True)
class MemHold:
    """What memory did to one process over the capture (first to last alive sample)."""

    key: Key
    window_s: float
    samples: int
    faults_per_s: float
    reclaim_samples: int
    limits: Optional[MemLimits]  # the last sample's
    limit_events: int  # v1 failcnt / v2 high + max, grown over the capture
    oom_kills: int  # grown over the capture

    @property
    def usage_share(self) -> Optional[float]:
        c = self.limits
        if c is None or c.usage_bytes is None:
            return None
        bound = min(x for x in (c.limit_bytes, c.high_bytes, 1 << 62) if x is not None)
        return c.usage_bytes / bound if bound < (1 << 62) and bound > 0 else None

    @property
    def pressure_pct(self) -> Optional[float]:
        c = self.limits
        if c is None:
            return None
        values = [x for x in (c.pressure_some_avg10, c.host_pressure_some_avg10) if x is not None]
        return max(values) if values else None


def _series(bundle: Bundle) -> Dict[Key, List[Tuple[float, ProcessSample]]]:
    out: Dict[Key, List[Tuple[float, ProcessSample]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            if ps.status == "alive":
                out.setdefault((ps.host, ps.pid), []).append((ps.t_s or sample.t_s, ps))
    return out


def _faults(first: ProcessSample, last: ProcessSample) -> Optional[int]:
    """Major faults over the window: its threads' (seen in both), else its group's."""
    before = {t.tid: t.majflt for t in first.threads if t.majflt is not None}
    grown = [
        t.majflt - before[t.tid] for t in last.threads if t.majflt is not None and t.tid in before
    ]
    if grown:
        return max(0, sum(grown))
    a, b = first.mem_limits, last.mem_limits
    if a is not None and b is not None and a.pgmajfault is not None and b.pgmajfault is not None:
        return max(0, b.pgmajfault - a.pgmajfault)
    return None


def _grown(a: Optional[int], b: Optional[int]) -> int:
    return max(0, b - a) if a is not None and b is not None else 0


def in_reclaim(wchan: Optional[str]) -> bool:
    return bool(wchan) and any(w in (wchan or "") for w in RECLAIM_WCHANS)


def _reclaim_samples(series: Sequence[Tuple[float, ProcessSample]]) -> int:
    """Samples where a thread of the process waited in reclaim or compaction."""
    return sum(any(in_reclaim(t.wchan) for t in ps.threads) for _, ps in series)


def mem_holds(bundle: Bundle) -> Dict[Key, MemHold]:
    """What memory did to each process seen alive in two samples or more."""
    out: Dict[Key, MemHold] = {}
    for key, series in _series(bundle).items():
        if len(series) < 2:
            continue
        (t0, first), (t1, last) = series[0], series[-1]
        window = max(0.0, t1 - t0)
        faults = per_class(bundle, "faults", key, partial(_faults, first, last)) or 0
        a, b = first.mem_limits, last.mem_limits
        events = 0
        if a is not None and b is not None and a.group == b.group:
            events = _grown(a.max_events, b.max_events) + _grown(a.high_events, b.high_events)
        oom = _grown(a.oom_kills, b.oom_kills) if a is not None and b is not None else 0
        out[key] = MemHold(
            key=key,
            window_s=window,
            samples=len(series),
            faults_per_s=faults / window if window > 0 else 0.0,
            # Only where its memory group was read: without it no shortage can be shown, and
            # every thread of every sample was ~1.5 s of a 1,024-rank verdict (bench.scale).
            reclaim_samples=(
                per_class(bundle, "reclaim", key, partial(_reclaim_samples, series))
                if b is not None
                else 0
            ),
            limits=b,
            limit_events=events,
            oom_kills=oom,
        )
    return out


def cause_of(hold: MemHold) -> bool:
    """Whether memory is why ``hold``'s process is slow."""
    stalls = hold.faults_per_s >= MIN_FAULTS_PER_S or hold.reclaim_samples > 0
    share = hold.usage_share
    short = (share is not None and share >= FULL_SHARE and hold.limit_events > 0) or (
        (hold.pressure_pct or 0.0) >= PRESSURE_PCT
    )
    return stalls and short


def under_pressure(
    bundle: Bundle, alive: Sequence[ProcSignals]
) -> List[Tuple[ProcSignals, MemHold]]:
    """The live processes memory holds back."""
    holds = mem_holds(bundle)
    return [
        (p, holds[p.key]) for p in alive if not p.dead and p.key in holds and cause_of(holds[p.key])
    ]


def hold_text(hold: MemHold) -> str:
    """ "its cgroup uses 63.9 MiB of its 64.0 MiB limit, 850 major faults/s, ..."."""
    parts = []
    c = hold.limits
    share = hold.usage_share
    if c is not None and share is not None and c.usage_bytes is not None:
        bound = min(x for x in (c.limit_bytes, c.high_bytes) if x is not None)
        parts.append(
            f"its cgroup uses {size(c.usage_bytes)} of its {size(bound)} limit "
            f"({share * 100:.0f} %)"
        )
    if hold.limit_events:
        parts.append(f"{hold.limit_events} charge(s) hit the limit during the capture")
    if hold.faults_per_s >= 1:
        parts.append(f"{hold.faults_per_s:.0f} major faults/s (pages read back)")
    if hold.reclaim_samples:
        parts.append(f"in reclaim in {hold.reclaim_samples} of {hold.samples} samples")
    if hold.pressure_pct is not None and hold.pressure_pct >= 1:
        parts.append(f"memory pressure {hold.pressure_pct:.0f} %")
    if hold.oom_kills:
        parts.append(f"its group's OOM killer fired {hold.oom_kills} time(s)")
    return ", ".join(parts)


def pressure_sentence(
    held: Sequence[Tuple[ProcSignals, MemHold]], alive: Sequence[ProcSignals]
) -> str:
    """ "slow: pid 42 is under memory pressure (...) - raise its memory limit or make it hold
    less; don't kill"."""
    procs = [p for p, _ in held]
    tail = peers_waiting_tail(procs, alive)
    return (
        f"{who(procs)} {verb(procs, 'is', 'are')} under memory pressure "
        f"({hold_text(held[0][1])}){tail} - its pages are evicted and read back as fast as "
        "it runs: raise its memory limit or make it hold less; don't kill"
    )


__all__ = [
    "MemHold",
    "cause_of",
    "hold_text",
    "in_reclaim",
    "mem_holds",
    "pressure_sentence",
    "under_pressure",
]
