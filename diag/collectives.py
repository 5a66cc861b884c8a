"""GPU, NCCL-log, Flight Recorder and RAS records → evidence and suspects (pure functions).

Each ``*_findings`` function reads model records only and returns ``findings.Finding``s; the
``*_source`` adapters plug them into the classifier's ``EVIDENCE_SOURCES`` (registered at
import: ``diag.classify`` imports this module). What they encode:

- Flight Recorder: sequence ids count per process group, so within a group the rank whose
  last enqueued collective lags the others never entered the next one ("rank 2 never entered
  all_reduce #4") - it is the suspect, the others are waiting for it. All ranks at the same id
  with one that enqueued but never *started* it (NCCL records start) points at that rank's GPU.
- NCCL logs: a CUDA error / Xid / NCCL error on a rank that then exited explains its peers'
  hang; watchdog lines name the waiters, and the lowest "last enqueued" among them the laggard.
- RAS: missing or dead ranks per communicator, a rank whose launched-collective counts lag,
  and counts that stop changing between queries (stuck) or rise (progress).
- GPU: a device that NVML reports lost names the rank on it. (Utilisation fused with power is
  ``findings.gpu_findings``; this module supplies its GPU-to-rank mapping.)
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from diag.findings import EVIDENCE_SOURCES, PROGRESS, STUCK, Context, Finding
from diag.model import (
    Bundle,
    Evidence,
    ProcessInfo,
    RankCollectives,
    RankNcclLog,
    RasCommunicator,
    RasSnapshot,
    Sample,
    Suspect,
)
from diag.probes import nccl_logs
from diag.probes.gpu import map_devices

_FAILURE_KINDS = ("cuda_error", "xid", "nccl_error")


def op_name(profiling_name: str) -> str:
    """``nccl:all_reduce`` → ``all_reduce`` (the backend prefix says nothing to a reader)."""
    return profiling_name.split(":", 1)[-1] or profiling_name


def _ranks_text(ranks: Sequence[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _suspect(rank: Optional[int], pid: Optional[int], host: str, reason: str) -> List[Suspect]:
    return [Suspect(pid=pid, rank=rank, host=host, reason=reason)] if pid is not None else []


def _finding(
    signal: str,
    detail: str,
    section: str,
    ranks: Iterable[Optional[int]] = (),
    suspects: Sequence[Suspect] = (),
    lean: Optional[str] = None,
) -> Finding:
    rank_tuple = tuple(r for r in ranks if r is not None)
    pids = tuple(s.pid for s in suspects)
    evidence = Evidence(
        signal=signal, detail=detail[:500], ranks=rank_tuple, pids=pids, section=section
    )
    return Finding(evidence, tuple(suspects), lean=lean)


def _pid_of(processes: Sequence[ProcessInfo], rank: int, host: str = "") -> Optional[int]:
    for info in processes:
        if info.rank == rank and (info.host == host or not host):
            return info.pid
    return None


def _last_seq(rec: RankCollectives) -> int:
    if rec.last_enqueued_seq is not None:
        return rec.last_enqueued_seq
    seqs = [c.seq for c in rec.recent if not c.is_p2p]
    return max(seqs, default=0)


def fr_findings(
    records: Sequence[RankCollectives], processes: Sequence[ProcessInfo] = ()
) -> List[Finding]:
    """Per process group: the rank(s) behind the others, missing dumps, ops never started."""
    out: List[Finding] = []
    # Global ranks are unique across hosts: a group spans nodes, so it is keyed by name only.
    groups: Dict[str, List[RankCollectives]] = {}
    for rec in records:
        groups.setdefault(rec.pg, []).append(rec)
    for pg, recs in sorted(groups.items()):
        seqs = {rec.rank: _last_seq(rec) for rec in recs}
        top = max(seqs.values())
        leaders = sorted(r for r, s in seqs.items() if s == top)
        ops = {c.seq: op_name(c.op) for rec in recs for c in rec.recent if not c.is_p2p}
        pg_text = f" (process group {pg})" if pg else ""
        for rec in sorted(recs, key=lambda r: r.rank):
            seq = seqs[rec.rank]
            if seq >= top:
                continue
            missing = ops.get(seq + 1, "the next collective")
            last = ops.get(seq)
            last_text = f"#{seq} ({last})" if last else f"#{seq}"
            detail = (
                f"rank {rec.rank} never entered {missing} #{seq + 1}{pg_text}: its last "
                f"collective is {last_text} while {_ranks_text(leaders)} reached #{top}"
            )
            pid = rec.pid if rec.pid is not None else _pid_of(processes, rec.rank, rec.host)
            suspects = _suspect(rec.rank, pid, rec.host, detail)
            out.append(_finding("fr-lag", detail, "collectives", [rec.rank], suspects, STUCK))
        expected = {r for rec in recs for r in rec.pg_ranks}
        absent = sorted(expected - set(seqs))
        if absent and len(seqs) > 0:
            detail = (
                f"no Flight Recorder dump from {_ranks_text(absent)}{pg_text} "
                f"while {_ranks_text(sorted(seqs))} wrote one"
            )
            out.append(_finding("fr-missing", detail, "collectives", absent))
        if len(set(seqs.values())) == 1 and len(recs) > 1:
            out.extend(_same_seq(recs, top, ops.get(top, "collective"), pg_text, processes))
    return out


def _same_seq(
    recs: Sequence[RankCollectives],
    seq: int,
    op: str,
    pg_text: str,
    processes: Sequence[ProcessInfo],
) -> List[Finding]:
    """Every rank enqueued #seq: the same collective? how far did each get with it?"""
    states = {}
    kinds: Dict[str, List[int]] = {}
    for rec in recs:
        entry = next((c for c in reversed(rec.recent) if c.seq == seq and not c.is_p2p), None)
        states[rec.rank] = entry.state if entry is not None else ""
        if entry is not None:
            kinds.setdefault(f"{op_name(entry.op)} {entry.sizes}".strip(), []).append(rec.rank)
    if len(kinds) > 1:  # rank 2 in barrier #5 while 0 and 1 are in all_reduce #5: never matches
        return _mismatch(recs, seq, kinds, pg_text, processes)
    # NCCL marks "started" only with timing on; "completed" elsewhere proves this rank joined.
    started = [r for r, s in states.items() if s == "started"]
    pending = sorted(r for r, s in states.items() if s == "scheduled")
    if started and pending:
        out = []
        for rank in pending:
            rec = next(r for r in recs if r.rank == rank)
            pid = rec.pid if rec.pid is not None else _pid_of(processes, rank, rec.host)
            detail = (
                f"rank {rank} enqueued {op} #{seq}{pg_text} but it never started on its GPU "
                f"while {_ranks_text(sorted(started))} started it: its stream is blocked"
            )
            suspects = _suspect(rank, pid, rec.host, detail)
            out.append(_finding("fr-not-started", detail, "collectives", [rank], suspects, STUCK))
        return out
    completed = [rec for rec in recs if rec.last_completed_seq is not None]
    if completed and all((rec.last_completed_seq or 0) < seq for rec in completed):
        detail = (
            f"all {len(recs)} ranks entered {op} #{seq}{pg_text} and none completed it: the "
            "collective itself is stuck (network, a peer outside this dump, or a GPU fault)"
        )
        ranks = sorted(rec.rank for rec in recs)
        return [_finding("fr-all-waiting", detail, "collectives", ranks, lean=STUCK)]
    return []


def _mismatch(
    recs: Sequence[RankCollectives],
    seq: int,
    kinds: Dict[str, List[int]],
    pg_text: str,
    processes: Sequence[ProcessInfo],
) -> List[Finding]:
    ordered = sorted(kinds.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    majority, major_ranks = ordered[0]
    out: List[Finding] = []
    for kind, ranks in ordered[1:]:
        detail = (
            f"{_ranks_text(ranks)} entered {kind} #{seq}{pg_text} while "
            f"{_ranks_text(major_ranks)} entered {majority} #{seq}: mismatched collectives "
            "never complete"
        )
        suspects: List[Suspect] = []
        if len(ranks) < len(major_ranks):  # a tie names nobody: either side may be wrong
            for rank in ranks:
                rec = next(r for r in recs if r.rank == rank)
                pid = rec.pid if rec.pid is not None else _pid_of(processes, rank, rec.host)
                suspects += _suspect(rank, pid, rec.host, detail)
        out.append(_finding("fr-mismatch", detail, "collectives", ranks, suspects, STUCK))
    return out


def _exited(samples: Sequence[Sample]) -> Dict[Tuple[str, int], Optional[int]]:
    """(host, pid) → exit code of processes exited or zombie by the last sample."""
    if not samples:
        return {}
    return {
        (ps.host, ps.pid): ps.exit_code
        for ps in samples[-1].processes
        if ps.status in ("exited", "zombie")
    }


def log_findings(
    logs: Sequence[RankNcclLog],
    samples: Sequence[Sample] = (),
    processes: Sequence[ProcessInfo] = (),
) -> List[Finding]:
    """CUDA/NCCL/Xid errors (a suspect when the rank then exited), watchdog timeouts."""
    out: List[Finding] = []
    gone = _exited(samples)
    for log in logs:
        by_kind = {s.kind: s for s in log.signals}
        who = f"rank {log.rank}" if log.rank is not None else f"PID {log.pid}"
        if log.rank is None and log.pid is None:  # a log several ranks share, no rank in it
            paths = sorted({s.path.rsplit("/", 1)[-1] for s in log.signals if s.path})
            who = f"an unattributed line in {', '.join(paths) or 'a log'}"
        failure = next((by_kind[k] for k in _FAILURE_KINDS if k in by_kind), None)
        if failure is not None:
            kind = failure.kind.replace("_", " ")
            then = ""
            if log.pid is not None and (log.host, log.pid) in gone:
                code = gone[(log.host, log.pid)]
                then = " and then exited" + (f" (exit code {code})" if code is not None else "")
            detail = f"{who} logged {kind}{then}: {failure.last_line}"
            reason = f"{kind} in its log{then}"
            suspects = _suspect(log.rank, log.pid, log.host, reason) if then else []
            signal = "nccl-log-" + failure.kind.replace("_", "-")
            out.append(_finding(signal, detail, "nccl-logs", [log.rank], suspects))
        elif "nccl_warn" in by_kind:
            warn = by_kind["nccl_warn"]
            detail = f"{who}: {warn.count} NCCL WARN line(s), last: {warn.last_line}"
            out.append(_finding("nccl-log-warn", detail, "nccl-logs", [log.rank]))
    out.extend(_watchdog_findings(logs, processes, samples[0].t_s if samples else None))
    return out


def _watchdog_findings(
    logs: Sequence[RankNcclLog], processes: Sequence[ProcessInfo], window_start: Optional[float]
) -> List[Finding]:
    timed_out = [lg for lg in logs if lg.rank is not None and lg.timeout_seq is not None]
    enq = {lg.rank: lg.last_enqueued_seq for lg in logs if lg.rank is not None}
    enq_known = {r: s for r, s in enq.items() if s is not None}
    out: List[Finding] = []
    if timed_out:
        first = timed_out[0]
        ranks = sorted(lg.rank for lg in timed_out if lg.rank is not None)
        # Only a timeout logged during (or after the start of) the capture says "stuck now".
        recent = any(
            (s.last_t_s or 0) >= (window_start or 0)
            for lg in timed_out
            for s in lg.signals
            if s.kind == "watchdog_timeout"
        )
        detail = (
            f"NCCL watchdog timed out on {_ranks_text(ranks)} in {first.timeout_op or 'a'} "
            f"collective #{first.timeout_seq}: these ranks waited; the rank that never "
            "joined is the culprit"
        )
        lean = STUCK if recent else None
        out.append(_finding("nccl-watchdog-timeout", detail, "nccl-logs", ranks, lean=lean))
    if len(enq_known) >= 2 and len(set(enq_known.values())) > 1:
        top = max(enq_known.values())
        for rank, seq in sorted(enq_known.items()):
            if seq >= top:
                continue
            detail = (
                f"rank {rank}'s last enqueued NCCL work is #{seq} while others reached #{top}: "
                "it never joined the collective the others wait in"
            )
            pid = next((lg.pid for lg in logs if lg.rank == rank and lg.pid is not None), None)
            pid = pid if pid is not None else _pid_of(processes, rank)
            suspects = _suspect(rank, pid, "", detail)
            out.append(_finding("nccl-watchdog-lag", detail, "nccl-logs", [rank], suspects))
    return out


def ras_findings(snapshots: Sequence[RasSnapshot]) -> List[Finding]:
    """Missing/dead ranks, lagging op counts, and counts frozen or rising across queries."""
    usable = [s for s in snapshots if s.communicators]
    if not usable:
        return []
    out: List[Finding] = []
    last = usable[-1]
    for comm in last.communicators:
        totals = {r.rank: sum(r.coll_counts.values()) for r in comm.ranks if not r.missing}
        top = max(totals.values(), default=0)
        for rank in comm.ranks:
            reason = ""
            if rank.missing or rank.dead:
                reason = "considered dead by NCCL RAS" if rank.dead else "did not answer RAS"
            elif rank.async_error or rank.aborted:
                reason = f"NCCL async error {rank.async_error}" if rank.async_error else "aborted"
            elif totals.get(rank.rank, top) < top:
                reason = f"launched {totals[rank.rank]} collectives, others {top}"
            if reason:
                detail = f"communicator {comm.comm_hash}: rank {rank.rank} {reason}"
                suspects = _suspect(rank.rank, rank.pid, "", detail)
                out.append(_finding("nccl-ras", detail, "collectives", [rank.rank], suspects))
    if len(usable) >= 2:
        first = {c.comm_hash: _counts(c) for c in usable[0].communicators}
        now = {c.comm_hash: _counts(c) for c in last.communicators}
        shared = [h for h in now if h in first]
        if shared and all(now[h] == first[h] for h in shared) and any(now[h] for h in shared):
            detail = f"NCCL RAS: collective counts unchanged over {len(usable)} queries"
            out.append(_finding("nccl-ras-frozen", detail, "collectives", lean=STUCK))
        elif any(sum(now[h]) > sum(first[h]) for h in shared):
            detail = "NCCL RAS: collective counts rose between queries"
            out.append(_finding("nccl-ras-progress", detail, "collectives", lean=PROGRESS))
    return out


def _counts(comm: RasCommunicator) -> Tuple[int, ...]:
    return tuple(sum(r.coll_counts.values()) for r in comm.ranks)


def gpu_error_findings(
    samples: Sequence[Sample], processes: Sequence[ProcessInfo]
) -> List[Finding]:
    """A GPU NVML reports lost (or erroring) in the last sample names the rank on it."""
    last = next((s.gpu for s in reversed(samples) if s.gpu is not None and s.gpu.available), None)
    if last is None:
        return []
    mapping = map_devices(last, processes)
    out: List[Finding] = []
    for dev in last.devices:
        if not dev.error:
            continue
        owner = mapping.get((dev.host, dev.index))
        info = owner[0] if owner else None
        rank = info.rank if info is not None else None
        rank_text = f" (rank {rank})" if rank is not None else ""
        where = f" on {dev.host}" if dev.host else ""
        detail = f"GPU {dev.index}{where}{rank_text}: NVML reports {dev.error}"
        suspects = _suspect(rank, info.pid, info.host, detail) if info is not None else []
        out.append(_finding("gpu-error", detail, "gpu", [rank], suspects))
    return out


def nccl_logs_of(bundle: Bundle) -> Tuple[RankNcclLog, ...]:
    """The bundle's NCCL log summary, or one derived from the recorded tails (old bundles)."""
    if bundle.nccl_logs:
        return bundle.nccl_logs
    return nccl_logs.summarize(nccl_logs.entries_from_samples(bundle.samples), bundle.processes)


def flight_recorder_source(ctx: Context) -> List[Finding]:
    return fr_findings(ctx.bundle.collectives, ctx.bundle.processes)


def nccl_log_source(ctx: Context) -> List[Finding]:
    return log_findings(nccl_logs_of(ctx.bundle), ctx.bundle.samples, ctx.bundle.processes)


def ras_source(ctx: Context) -> List[Finding]:
    return ras_findings([s.ras for s in ctx.bundle.samples if s.ras is not None])


def gpu_error_source(ctx: Context) -> List[Finding]:
    return gpu_error_findings(ctx.bundle.samples, ctx.bundle.processes)


for _source in (flight_recorder_source, nccl_log_source, ras_source, gpu_error_source):
    if _source not in EVIDENCE_SOURCES:
        EVIDENCE_SOURCES.append(_source)
