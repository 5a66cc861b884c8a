"""GPU, NCCL-log, Flight Recorder and RAS records → evidence and suspects (pure functions).

Each ``*_findings`` function reads model records only and returns ``findings.Finding``s; the
``*_source`` adapters plug them into the classifier's ``EVIDENCE_SOURCES`` (registered at
import: ``diag.verdict.classify`` imports this module). What they encode:

- Flight Recorder: the rank behind the others in its process group, missing dumps, ops never
  started or mismatched (``diag.verdict.fr_findings``; registered here with the rest).
- NCCL logs: a CUDA error / Xid / NCCL error on a rank that then exited explains its peers'
  hang; watchdog lines name the waiters, and the lowest "last enqueued" among them the laggard.
- RAS: missing or dead ranks per communicator, a rank whose launched-collective counts lag,
  and counts that stop changing between queries (stuck) or rise (progress).
- GPU: a device that NVML reports lost names the rank on it. (Utilisation fused with power is
  ``findings.gpu_findings``; this module supplies its GPU-to-rank mapping.)
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import (
    ProcessInfo,
    RankNcclLog,
    RasCommunicator,
    RasSnapshot,
    Sample,
)
from diag.verdict.collective_evidence import finding, pid_of, ranks_text, suspect_list
from diag.verdict.fr_findings import fr_findings
from diag.verdict.gpu import map_devices
from diag.verdict.sources import PROGRESS, STUCK, Context, Finding
from diag.vocab import EvidenceSignal, Lean, ReportSection

# fr_findings is re-exported: this module is where every collective source is registered.
__all__ = ["fr_findings", "gpu_error_findings", "log_findings", "ras_findings"]

# What a rank's collective-log lines mean (the packs' ``log_kinds``): (kind, signal) of the
# failures in order, of the warnings, of the timed-out collectives.
_FAILURES = union.LOG_FAILURES
_WARNINGS = union.LOG_WARNINGS
_TIMEOUT_KINDS = frozenset(kind for kind, _ in union.LOG_TIMEOUTS)
_TIMEOUT_SIGNAL: Optional[EvidenceSignal] = union.LOG_TIMEOUTS[0][1] if union.LOG_TIMEOUTS else None
# The report's sections for them: the rank's log lines, and its collectives (RAS).
_LOGS: ReportSection = "nccl-logs"
_COLLECTIVES: ReportSection = "collectives"


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
        failure = next(((by_kind[k], sig) for k, sig in _FAILURES if k in by_kind), None)
        warned = next(((by_kind[k], sig) for k, sig in _WARNINGS if k in by_kind), None)
        if failure is not None:
            hit, signal = failure
            kind = hit.kind.replace("_", " ")
            then = ""
            if log.pid is not None and (log.host, log.pid) in gone:
                code = gone[(log.host, log.pid)]
                then = " and then exited" + (f" (exit code {code})" if code is not None else "")
            detail = f"{who} logged {kind}{then}: {hit.last_line}"
            reason = f"{kind} in its log{then}"
            suspects = suspect_list(log.rank, log.pid, log.host, reason) if then else []
            out.append(finding(signal, detail, _LOGS, [log.rank], suspects))
        elif warned is not None:
            warn, signal = warned
            detail = f"{who}: {warn.count} NCCL WARN line(s), last: {warn.last_line}"
            out.append(finding(signal, detail, _LOGS, [log.rank]))
    out.extend(_watchdog_findings(logs, processes, samples[0].t_s if samples else None))
    return out


def _watchdog_findings(
    logs: Sequence[RankNcclLog], processes: Sequence[ProcessInfo], window_start: Optional[float]
) -> List[Finding]:
    timed_out = [lg for lg in logs if lg.rank is not None and lg.timeout_seq is not None]
    enq = {lg.rank: lg.last_enqueued_seq for lg in logs if lg.rank is not None}
    enq_known = {r: s for r, s in enq.items() if s is not None}
    out: List[Finding] = []
    if timed_out and _TIMEOUT_SIGNAL is not None:
        first = timed_out[0]
        ranks = sorted(lg.rank for lg in timed_out if lg.rank is not None)
        # Only a timeout logged during (or after the start of) the capture says "stuck now".
        recent = any(
            (s.last_t_s or 0) >= (window_start or 0)
            for lg in timed_out
            for s in lg.signals
            if s.kind in _TIMEOUT_KINDS
        )
        detail = (
            f"NCCL watchdog timed out on {ranks_text(ranks)} in {first.timeout_op or 'a'} "
            f"collective #{first.timeout_seq}: these ranks waited; the rank that never "
            "joined is the culprit"
        )
        lean: Optional[Lean] = STUCK if recent else None
        out.append(finding(_TIMEOUT_SIGNAL, detail, _LOGS, ranks, lean=lean))
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
            pid = pid if pid is not None else pid_of(processes, rank)
            suspects = suspect_list(rank, pid, "", detail)
            out.append(finding("nccl-watchdog-lag", detail, _LOGS, [rank], suspects))
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
                suspects = suspect_list(rank.rank, rank.pid, "", detail)
                out.append(finding("nccl-ras", detail, _COLLECTIVES, [rank.rank], suspects))
    if len(usable) >= 2:
        first = {c.comm_hash: _counts(c) for c in usable[0].communicators}
        now = {c.comm_hash: _counts(c) for c in last.communicators}
        shared = [h for h in now if h in first]
        if shared and all(now[h] == first[h] for h in shared) and any(now[h] for h in shared):
            detail = f"NCCL RAS: collective counts unchanged over {len(usable)} queries"
            out.append(finding("nccl-ras-frozen", detail, _COLLECTIVES, lean=STUCK))
        elif any(sum(now[h]) > sum(first[h]) for h in shared):
            detail = "NCCL RAS: collective counts rose between queries"
            out.append(finding("nccl-ras-progress", detail, _COLLECTIVES, lean=PROGRESS))
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
        suspects = suspect_list(rank, info.pid, info.host, detail) if info is not None else []
        out.append(finding("gpu-error", detail, "gpu", [rank], suspects))
    return out


def flight_recorder_source(ctx: Context) -> List[Finding]:
    return fr_findings(ctx.bundle.collectives, ctx.bundle.processes)


def nccl_log_source(ctx: Context) -> List[Finding]:
    return log_findings(ctx.bundle.nccl_logs, ctx.bundle.samples, ctx.bundle.processes)


def ras_source(ctx: Context) -> List[Finding]:
    return ras_findings([s.ras for s in ctx.bundle.samples if s.ras is not None])


def gpu_error_source(ctx: Context) -> List[Finding]:
    return gpu_error_findings(ctx.bundle.samples, ctx.bundle.processes)
