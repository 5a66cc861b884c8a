"""Who the ranks wait for: the straggler analysis of a multi-rank job that progresses or is slow.

A data-parallel job whose ranks all progress can still run at the pace of one of them: the
rank that computes longest per step makes every other rank wait for it in each all-reduce.
Nothing is stuck, so no deadlock rule names it, yet it is the most useful name at scale
(NVIDIA's straggler scores, ByteRobust's outlier groups). Here each rank's share of the samples
is counted - its main thread in a peer wait (a collective, a barrier, a c10d store) versus
computing - beside its main thread's CPU and, where a Flight Recorder dump exists, how late it
enqueues collectives and how long they last on its device.

The rank the others wait for computes in most samples at a CPU well above theirs while they
are seen waiting on their peers. Both must hold: with three samples a share alone is noise
(a balanced job's ranks may each be caught in a different phase), a CPU gap alone may be a
rank doing extra work nobody waits for. A job with no such outlier names none, and says so.

Pure: reads the bundle's samples and the participants' features; one pass over the samples,
so it stays cheap at 4,096 ranks.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from statistics import StatisticsError, median
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import (
    Bundle,
    Evidence,
    ProcessInfo,
    RankCollectives,
    RankLoad,
    StragglerBasis,
    Stragglers,
    Suspect,
    ThreadSample,
    main_thread,
)
from diag.text.units import rank_set
from diag.verdict.features import ProcSignals
from diag.verdict.gpu_health import gpu_stragglers, throttle_tail
from diag.verdict.thread_wait import NATIVE_PEER_LABEL, rank_wait
from diag.verdict.waits import PEER, family, short_name

MAX_RANK_LOADS = 64  # rank rows kept in the verdict: the stragglers first, then the least idle
STRAGGLER_COMPUTE_SHARE = 0.6  # the straggler computes in at least this share of its samples
STRAGGLER_WAIT_SHARE = 0.34  # ... and waits on its peers in at most this share
STRAGGLER_MAIN_CPU_PCT = 5.0  # ... with its main thread on a CPU at least this much
WAITER_WAIT_SHARE = 0.3  # the others' median peer-wait share (or a collective backend runs)
# The straggler's main-thread CPU over the others' median, at least: a ratio, not a gap in
# points, because on a shared host every rank gets a fraction of a core and the ratio holds.
CPU_RATIO = 2.0
CPU_GAP_PCT = 3.0  # ... and this many points of a core above it (not rounding noise)
# Or this many times the others' median, whatever its stack shares, while the others wait on
# their peers in most samples: CPU time integrates the whole capture, three stacks don't.
DOMINANT_CPU_RATIO = 4.0
FR_LAG_MIN_MS = 20.0  # Flight Recorder: a straggler enqueues this much later on average
FR_LAG_RATIO = 3.0  # ... and this many times the other ranks' median lag


@dataclass
class _Tally:
    """One rank's counts while the samples are read."""

    proc: ProcSignals
    samples: int = 0
    peer: int = 0
    compute: int = 0
    own: int = 0  # in a wait of its own (its input, a sleep), not on its peers
    ops: Dict[str, int] = field(default_factory=dict)
    own_ops: Dict[str, int] = field(default_factory=dict)
    first: Optional[Tuple[float, int]] = None  # (t_s, main-thread ticks)
    last: Optional[Tuple[float, int]] = None


_Read = Tuple[str, str]  # ("peer" / "compute" / "own", the op it counts under or "")


def _read(bundle: Bundle, info: ProcessInfo, main: ThreadSample) -> _Read:
    """What one main-thread sample counts as, and under which op."""
    tw = rank_wait(bundle, info, main)
    if family(tw.kind) == PEER:
        # a c10d store, or a C call py-spy can't name
        return "peer", (f"`{short_name(tw.label)}`" if tw.label != NATIVE_PEER_LABEL else "")
    if tw.kind is None:
        return "compute", ""
    return "own", f"`{short_name(tw.caller or tw.label)}`"


def _tally(bundle: Bundle, ranks: Sequence[ProcSignals]) -> List[_Tally]:
    tallies = {p.key: _Tally(p) for p in ranks}
    # By the main thread's record (a merge shares equal ones: identity) and what rank_wait
    # reads of the process: 16,384 ranks x 3 samples read a handful of distinct records.
    seen: Dict[Tuple[int, object], _Read] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            tally = tallies.get((ps.host, ps.pid))
            if tally is None or ps.status != "alive":
                continue
            main = main_thread(ps)
            if main is None:
                continue
            tally.samples += 1
            info = tally.proc.info
            key = (id(main), (info.rank is not None, info.world_size, info.rank_source))
            found = seen.get(key)
            if found is None:
                found = seen[key] = _read(bundle, info, main)
            what, op = found
            if what == "peer":
                tally.peer += 1
                if op:
                    tally.ops[op] = tally.ops.get(op, 0) + 1
            elif what == "compute":
                tally.compute += 1
            else:
                tally.own += 1
                tally.own_ops[op] = tally.own_ops.get(op, 0) + 1
            point = (ps.t_s or sample.t_s, main.utime_ticks + main.stime_ticks)
            tally.first = tally.first or point
            tally.last = point
    return list(tallies.values())


def _main_cpu_pct(tally: _Tally, clk: int) -> float:
    if tally.first is None or tally.last is None or tally.last[0] <= tally.first[0]:
        return 0.0
    ticks = max(0, tally.last[1] - tally.first[1])
    return ticks * 100.0 / clk / (tally.last[0] - tally.first[0])


def _fr_figures(
    records: Sequence[RankCollectives],
) -> Dict[int, Tuple[Optional[int], Optional[float], Optional[float]]]:
    """rank -> (last sequence id, mean enqueue lag in ms, mean device duration in ms).

    The lag of one collective is how long after the first rank this rank enqueued it; only
    ranks on one host compare clocks (a merged bundle's hosts are skewed)."""
    last: Dict[int, int] = {}
    created: Dict[Tuple[str, int], Dict[int, float]] = {}
    durations: Dict[int, List[float]] = {}
    hosts = {rec.host for rec in records}
    for rec in records:
        seqs = [c.seq for c in rec.recent if not c.is_p2p]
        top = rec.last_enqueued_seq if rec.last_enqueued_seq is not None else max(seqs, default=0)
        last[rec.rank] = max(last.get(rec.rank, 0), top)
        for c in rec.recent:
            if c.is_p2p:
                continue
            if c.created_s is not None and len(hosts) == 1:
                created.setdefault((rec.pg, c.seq), {})[rec.rank] = c.created_s
            if c.duration_ms is not None:
                durations.setdefault(rec.rank, []).append(c.duration_ms)
    lags: Dict[int, List[float]] = {}
    for by_rank in created.values():
        if len(by_rank) < 2:
            continue
        first = min(by_rank.values())
        for rank, t_s in by_rank.items():
            lags.setdefault(rank, []).append((t_s - first) * 1000.0)
    out: Dict[int, Tuple[Optional[int], Optional[float], Optional[float]]] = {}
    for rank in last:
        lag = lags.get(rank)
        dur = durations.get(rank)
        out[rank] = (
            last[rank],
            sum(lag) / len(lag) if lag else None,
            sum(dur) / len(dur) if dur else None,
        )
    return out


_BACKEND_THREADS = union.BACKEND_THREADS  # a collective backend's threads (its pack's)


def _collective_backend(bundle: Bundle, procs: Sequence[ProcSignals]) -> bool:
    """A rank of the last sample runs a collective backend's threads (by /proc comm)."""
    ranks = {p.key for p in procs if p.rank is not None}
    for ps in bundle.samples[-1].processes if bundle.samples else ():
        if (ps.host, ps.pid) in ranks:
            return any(t.name.startswith(_BACKEND_THREADS) for t in ps.threads)
    return False


def rank_loads(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[RankLoad]:
    """One ``RankLoad`` per live rank seen in two samples or more, in rank order."""
    ranks = [p for p in procs if p.rank is not None and not p.dead]
    clk = bundle.host.clk_tck or 100
    fr = _fr_figures(bundle.collectives)
    out: List[RankLoad] = []
    for tally in _tally(bundle, ranks):
        p = tally.proc
        if tally.samples < 2 or p.rank is None:
            continue
        last_seq, lag, dur = fr.get(p.rank, (None, None, None))
        op = max(tally.ops, key=lambda k: tally.ops[k]) if tally.ops else ""
        own_op = max(tally.own_ops, key=lambda k: tally.own_ops[k]) if tally.own_ops else ""
        out.append(
            RankLoad(
                rank=p.rank,
                pid=p.pid,
                host=p.key[0],
                samples=tally.samples,
                peer_wait_samples=tally.peer,
                compute_samples=tally.compute,
                wait_op=op,
                own_wait_samples=tally.own,
                own_wait_op=own_op,
                main_cpu_pct=round(_main_cpu_pct(tally, clk), 1),
                cpu_pct=round(p.cpu_pct, 1),
                fr_last_seq=last_seq,
                fr_enqueue_lag_ms=None if lag is None else round(lag, 1),
                fr_duration_ms=None if dur is None else round(dur, 1),
            )
        )
    out.sort(key=lambda r: (r.rank, r.host))
    return out


def _by_samples(loads: Sequence[RankLoad], collective: Callable[[], bool]) -> List[RankLoad]:
    """The ranks that compute at a multiple of the others' CPU while in a job that syncs
    (empty: no outlier). On a shared host a waiting rank may be caught runnable in its compute
    frame in every sample, so the stack shares alone miss it; the CPU ratio does not."""
    cpu = _OthersMedian([q.main_cpu_pct for q in loads])
    waits = _OthersMedian([q.peer_wait_share for q in loads])
    cands = [
        r
        for r in loads
        if r.main_cpu_pct >= STRAGGLER_MAIN_CPU_PCT
        and (
            (
                r.compute_share >= STRAGGLER_COMPUTE_SHARE
                and r.peer_wait_share <= STRAGGLER_WAIT_SHARE
                # against the others' median, not one it is part of: of two pipeline stages,
                # the median of both is half the bottleneck's own CPU whatever its neighbour
                # burns
                and r.main_cpu_pct >= cpu.without(r.main_cpu_pct) * CPU_RATIO
            )
            or _dominates(cpu, waits, r)
        )
    ]
    if not cands or len(cands) > max(1, len(loads) // 4):
        return []
    others = [r for r in loads if r not in cands]
    others_cpu = median(r.main_cpu_pct for r in others)
    if any(
        r.main_cpu_pct < others_cpu * CPU_RATIO or r.main_cpu_pct - others_cpu < CPU_GAP_PCT
        for r in cands
    ):
        return []
    # Ranks that never meet in a collective wait for nobody: the others must be seen in a peer
    # wait, or the job's processes run a collective backend (gloo's, NCCL's threads).
    if median(r.peer_wait_share for r in others) < WAITER_WAIT_SHARE and not collective():
        return []
    return cands


class _OthersMedian:
    """The median of every rank's value but one rank's, each asked in O(log n): a median of
    the others per rank was n^2 log n - 16 s of a 16,384-rank verdict. Equal to
    ``statistics.median`` over the others: one occurrence of the value taken out of the
    sorted whole (which one does not matter: equal values), then the middle of the rest."""

    def __init__(self, values: List[float]) -> None:
        self.values = sorted(values)

    def without(self, value: float) -> float:
        whole = self.values
        n = len(whole) - 1  # the others
        if n <= 0:
            raise StatisticsError("no median for empty data")
        gone = bisect_left(whole, value)

        def at(i: int) -> float:  # the i-th of the others
            return whole[i] if i < gone else whole[i + 1]

        if n % 2:
            return at(n // 2)
        return (at(n // 2 - 1) + at(n // 2)) / 2


def _dominates(cpu: _OthersMedian, waits: _OthersMedian, r: RankLoad) -> bool:
    """A rank at ``DOMINANT_CPU_RATIO`` times the others' main-thread CPU while the others wait
    on their peers in most samples: the one they wait for, even where three samples caught it
    in its own short waits (a pipeline stage receiving its gradients, on a busy host)."""
    return (
        r.main_cpu_pct >= cpu.without(r.main_cpu_pct) * DOMINANT_CPU_RATIO
        and waits.without(r.peer_wait_share) >= STRAGGLER_COMPUTE_SHARE
        and r.peer_wait_share < 1.0
    )


def _by_own_wait(loads: Sequence[RankLoad]) -> List[RankLoad]:
    """The ranks that wait on something of their own (a data loader's queue, a slow read, a
    sleep) in most samples and almost never on their peers, while the others wait on their
    peers in most samples: the others wait for them, and they wait for their input - the
    most common straggler, which burns no CPU and so escapes ``_by_samples``."""
    cands = [
        r
        for r in loads
        if r.own_wait_share >= STRAGGLER_COMPUTE_SHARE and r.peer_wait_share <= STRAGGLER_WAIT_SHARE
    ]
    if not cands or len(cands) > max(1, len(loads) // 4):
        return []
    others = [r for r in loads if r not in cands]
    if median(r.peer_wait_share for r in others) < STRAGGLER_COMPUTE_SHARE:
        return []
    return cands


def _own_wait_summary(slow: Sequence[RankLoad], others: Sequence[RankLoad]) -> str:
    shares = [r.own_wait_share * 100 for r in slow]
    ops = sorted({r.own_wait_op for r in slow if r.own_wait_op})
    where = f" in {', '.join(ops[:2])}" if ops else ""
    verb = "waits" if len(slow) == 1 else "wait"
    return (
        f"straggler: {_who(slow)} {verb} on {'its' if len(slow) == 1 else 'their'} own "
        f"work{where} (not on its peers) {_pct_span(shares)} of the samples - its input, a "
        f"read or a sleep; {_waiters_text(others)}"
    )


def _by_flight_recorder(loads: Sequence[RankLoad]) -> List[RankLoad]:
    """The rank that enqueues its collectives well after the others (same host clock)."""
    timed = [r for r in loads if r.fr_enqueue_lag_ms is not None]
    if len(timed) < 2:
        return []
    worst = max(timed, key=lambda r: r.fr_enqueue_lag_ms or 0.0)
    rest = median((r.fr_enqueue_lag_ms or 0.0) for r in timed if r is not worst)
    lag = worst.fr_enqueue_lag_ms or 0.0
    if lag >= FR_LAG_MIN_MS and lag >= rest * FR_LAG_RATIO:
        return [worst]
    return []


def _pct_span(values: Sequence[float]) -> str:
    lo, hi = round(min(values)), round(max(values))
    return f"{lo} %" if lo == hi else f"{lo}-{hi} %"


def _who(loads: Sequence[RankLoad]) -> str:
    """ "rank 2", "ranks 0, 1, 3", with the node in a merged bundle when they share one."""
    text = rank_set(r.rank for r in loads)
    hosts = sorted({r.host for r in loads if r.host})
    return f"{text} on {hosts[0]}" if len(hosts) == 1 else text


def _waiters_text(others: Sequence[RankLoad]) -> str:
    ops: Dict[str, int] = {}
    for r in others:
        if r.wait_op:
            ops[r.wait_op] = ops.get(r.wait_op, 0) + 1
    op = f" in {max(ops, key=lambda k: ops[k])}" if ops else ""
    shares = [r.peer_wait_share * 100 for r in others]
    cpus = [r.main_cpu_pct for r in others]
    who = rank_set(r.rank for r in others)
    seen = f"{op} {_pct_span(shares)} of the samples" if max(shares) > 0 else ""
    return f"{who} wait for it{seen} (main thread {_pct_span(cpus)} of a core){_p2p_remedy(ops)}"


def _p2p_remedy(ops: Dict[str, int]) -> str:
    """Where the others wait for it mostly in point-to-point calls (a receive from it, a send
    to it), it is a pipeline stage the next ones wait for: the split between stages is
    uneven, and moving layers off it is the remedy - more ranks would wait the same."""
    p2p = sum(n for op, n in ops.items() if op.strip("`") in union.P2P_FRAMES)
    if not ops or p2p * 2 <= sum(ops.values()):
        return ""
    return (
        "; those are point-to-point waits: it is the bottleneck stage of a pipeline - "
        "rebalance the split (move layers off it to its neighbours)"
    )


def _sample_summary(slow: Sequence[RankLoad], others: Sequence[RankLoad]) -> str:
    shares = [r.compute_share * 100 for r in slow]
    cpus = [r.main_cpu_pct for r in slow]
    typical = median(r.main_cpu_pct for r in others)
    ratio = f" at {min(cpus) / typical:.1f}x the others' CPU" if typical > 0 else ""
    verb = "computes" if len(slow) == 1 else "compute"
    return (
        f"straggler: {_who(slow)} {verb} {_pct_span(shares)} of the samples{ratio} (main "
        f"thread {_pct_span(cpus)} of a core); {_waiters_text(others)}"
    )


def _fr_summary(slow: RankLoad, others: Sequence[RankLoad]) -> str:
    lags = [r.fr_enqueue_lag_ms or 0.0 for r in others]
    text = (
        f"straggler: {_who([slow])} enqueues its collectives {slow.fr_enqueue_lag_ms:.0f} ms "
        f"after the first rank on average (Flight Recorder; {rank_set(r.rank for r in others)}: "
        f"{min(lags):.0f}-{max(lags):.0f} ms)"
    )
    durs = [r.fr_duration_ms for r in others if r.fr_duration_ms is not None]
    if durs and slow.fr_duration_ms is not None:
        text += (
            f"; the others wait for it inside the collective ({min(durs):.0f}-{max(durs):.0f} ms "
            f"each, its own {slow.fr_duration_ms:.0f} ms)"
        )
    return text


def _fr_confirms(slow: Sequence[RankLoad], others: Sequence[RankLoad]) -> str:
    """The Flight Recorder's word beside the samples', where its dumps give enqueue times."""
    lags = [r.fr_enqueue_lag_ms for r in others if r.fr_enqueue_lag_ms is not None]
    mine = [r.fr_enqueue_lag_ms for r in slow if r.fr_enqueue_lag_ms is not None]
    if not lags or not mine:
        return ""
    verb = "enqueues" if len(slow) == 1 else "enqueue"
    return (
        f"; Flight Recorder: {_who(slow)} {verb} its collectives {min(mine):.0f} ms after the "
        f"first rank on average (the others {min(lags):.0f}-{max(lags):.0f} ms)"
    )


def _none_summary(loads: Sequence[RankLoad]) -> str:
    shares = [r.peer_wait_share * 100 for r in loads]
    cpus = [r.main_cpu_pct for r in loads]
    return (
        f"no straggler: {rank_set(r.rank for r in loads)} wait on their peers "
        f"{_pct_span(shares)} of the samples alike (main threads {_pct_span(cpus)} of a core)"
    )


def _kept(loads: Sequence[RankLoad], slow: Sequence[RankLoad]) -> Tuple[RankLoad, ...]:
    """The stragglers first, then the ranks that wait least: the rows worth a look."""
    rest = sorted((r for r in loads if r not in slow), key=lambda r: (r.peer_wait_share, r.rank))
    return tuple([*slow, *rest][:MAX_RANK_LOADS])


def straggler_analysis(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[Stragglers]:
    """The analysis for a job of two ranks or more seen in two samples; None otherwise."""
    loads = rank_loads(bundle, procs)
    if len(loads) < 2:
        return None
    kind: StragglerBasis = "samples"
    slow = _by_samples(loads, lambda: _collective_backend(bundle, procs))
    if not slow:
        slow, kind = _by_own_wait(loads), "own-wait"
    if not slow:
        slow, kind = _by_flight_recorder(loads), "flight-recorder"
    by_gpu = gpu_stragglers(bundle, [(r.host, r.rank) for r in loads])  # issue #37
    if not slow and by_gpu:
        slow, kind = [r for r in loads if (r.host, r.rank) in by_gpu], "gpu-throttle"
    others = [r for r in loads if r not in slow]
    if not slow:
        summary, kind = _none_summary(loads), "none"
    elif kind == "samples":
        summary = _sample_summary(slow, others) + _fr_confirms(slow, others)
    elif kind == "own-wait":
        summary = _own_wait_summary(slow, others) + _fr_confirms(slow, others)
    elif kind == "gpu-throttle":
        texts = "; ".join(by_gpu[(r.host, r.rank)] for r in slow)
        summary = f"straggler: {_who(slow)} - {texts}; {_waiters_text(others)}"
    else:
        summary = _fr_summary(slow[0], others)
    if kind != "gpu-throttle":  # a straggler named by its stacks or dumps: why it is slow
        summary += throttle_tail(bundle, [(r.host, r.rank) for r in slow])
    multi_host = len({r.host for r in loads}) > 1
    kept = _kept(loads, slow)
    return Stragglers(
        ranks=kept,
        ranks_more=len(loads) - len(kept),
        suspects=tuple(r.rank for r in slow),
        suspect_hosts=tuple(sorted({r.host for r in slow})) if multi_host else (),
        summary=summary,
        basis=kind,
    )


@dataclass(frozen=True)
class StragglerParts:
    """What the analysis adds to a verdict: the record, an evidence line (also when nobody is
    named - "no straggler" is a finding), and for a rank the verdict did not name already, a
    suspect and the sentence the classifier joins to the summary."""

    record: Optional[Stragglers] = None
    tail: str = ""
    evidence: Tuple[Evidence, ...] = ()
    suspects: Tuple[Suspect, ...] = ()


def straggler_parts(
    state: str, bundle: Bundle, procs: Sequence[ProcSignals], named: Sequence[Suspect]
) -> StragglerParts:
    """The parts for a progressing or slow job of two ranks or more; empty otherwise."""
    if state not in ("progressing", "slow"):
        return StragglerParts()
    analysis = straggler_analysis(bundle, procs)
    if analysis is None:
        return StragglerParts()
    evidence = Evidence(
        signal="straggler" if analysis.suspects else "no-straggler",
        detail=analysis.summary,
        ranks=analysis.suspects,
        section="stragglers",
    )
    already = {(s.host, s.rank) for s in named if s.rank is not None}
    new = [
        r for r in analysis.ranks if r.rank in analysis.suspects and (r.host, r.rank) not in already
    ]
    reason = "the rank the others wait for: " + analysis.summary.removeprefix("straggler: ")
    return StragglerParts(
        record=analysis,
        tail=f"; {analysis.summary}" if new else "",
        evidence=(evidence,),
        suspects=tuple(Suspect(pid=r.pid, rank=r.rank, host=r.host, reason=reason) for r in new),
    )
