"""Report sections for evidence beyond stacks: Flight Recorder, NCCL RAS, NCCL logs, hosts.

These sources answer "which rank is behind" directly (a Flight Recorder sequence id that lags,
a rank RAS reports missing, a watchdog timeout naming an op), so the report shows them next to
the stacks; the verdict's evidence links here with ``collectives`` and ``nccl-logs``. Multi-host
bundles also list every host with its measured clock offset: skew is shown, never hidden.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from diag.model import Bundle, RankCollectives, RankNcclLog
from diag.render import fmt
from diag.render.index import BundleIndex
from diag.render.view import CollectiveRow, HostRow, NcclLogRow, RasRow

MAX_ROWS = 200


def _seq(value: Optional[int]) -> str:
    return "–" if value is None else str(value)


def _who(index: BundleIndex, rank: Optional[int], pid: Optional[int], host: str) -> Tuple[str, str]:
    proc = index.proc_for_pid(pid, host) if pid is not None else None
    if proc is None and rank is not None:
        proc = index.by_rank.get(rank)
    if proc is not None:
        return proc.label, proc.anchor
    return (f"rank {rank}" if rank is not None else f"pid {pid}"), ""


def _reached(rec: RankCollectives) -> Optional[int]:
    """The furthest collective this rank got to (enqueued, else started, else completed)."""
    for seq in (rec.last_enqueued_seq, rec.last_started_seq, rec.last_completed_seq):
        if seq is not None:
            return seq
    return None


def build_collectives(index: BundleIndex) -> Tuple[CollectiveRow, ...]:
    """One row per rank and process group; ``behind``: how many collectives its peers are ahead."""
    records = index.bundle.collectives
    newest: Dict[str, int] = {}
    for rec in records:
        reached = _reached(rec)
        if reached is not None:
            newest[rec.pg] = max(newest.get(rec.pg, reached), reached)
    out = []
    for rec in sorted(records, key=lambda r: (r.pg, r.rank))[:MAX_ROWS]:
        label, anchor = _who(index, rec.rank, rec.pid, rec.host)
        reached = _reached(rec)
        behind = newest[rec.pg] - reached if reached is not None and rec.pg in newest else 0
        entry = rec.recent[-1] if rec.recent else None
        out.append(
            CollectiveRow(
                who=label,
                anchor=anchor,
                pg=rec.pg or "default",
                enqueued=_seq(rec.last_enqueued_seq),
                started=_seq(rec.last_started_seq),
                completed=_seq(rec.last_completed_seq),
                behind=behind,
                last_op=f"#{entry.seq} {entry.op} ({entry.state})" if entry is not None else "–",
                source=rec.source,
            )
        )
    return tuple(out)


def _nccl_logs(bundle: Bundle) -> Sequence[RankNcclLog]:
    # Older bundles carry none: ``diag report`` derives it from the log tails before rendering.
    return bundle.nccl_logs


def build_nccl_logs(index: BundleIndex) -> Tuple[NcclLogRow, ...]:
    out = []
    for entry in _nccl_logs(index.bundle):
        label, anchor = _who(index, entry.rank, entry.pid, entry.host)
        seqs = ""
        if entry.timeout_seq is not None:
            seqs = f"timed out at #{entry.timeout_seq} {entry.timeout_op or ''}".strip()
        elif entry.last_completed_seq is not None:
            seqs = (
                f"enqueued #{_seq(entry.last_enqueued_seq)}, completed #{entry.last_completed_seq}"
            )
        for sig in entry.signals:
            out.append(
                NcclLogRow(
                    who=label,
                    anchor=anchor,
                    kind=sig.kind,
                    count=sig.count,
                    last_line=fmt.clip(sig.last_line, 400),
                    when=fmt.utc(sig.last_t_s) if sig.last_t_s else "",
                    seqs=seqs,
                )
            )
    return tuple(out[:MAX_ROWS])


def build_ras(index: BundleIndex) -> Tuple[RasRow, ...]:
    snap = next((s.ras for s in reversed(index.bundle.samples) if s.ras is not None), None)
    if snap is None:
        return ()
    out = []
    for comm in snap.communicators:
        missing = [r.rank for r in comm.ranks if r.missing]
        dead = [r.rank for r in comm.ranks if r.dead]
        totals = sorted({sum(r.coll_counts.values()) for r in comm.ranks})
        out.append(
            RasRow(
                comm=comm.comm_hash,
                size=comm.size,
                missing=fmt.runs(missing) or str(comm.missing_ranks or "none"),
                dead=fmt.runs(dead) or "none",
                launched=", ".join(str(t) for t in totals[:6]) or "–",
            )
        )
    return tuple(out)


def build_hosts(bundle: Bundle) -> Tuple[HostRow, ...]:
    out = []
    for h in bundle.hosts:
        offset = "not measured"
        if h.clock_offset_s is not None:
            offset = f"{h.clock_offset_s * 1000:+.1f} ms"
            if h.clock_offset_error_s is not None:
                offset += f" ± {h.clock_offset_error_s * 1000:.1f} ms"
        out.append(
            HostRow(
                name=h.name,
                status=h.status + (f": {h.reason}" if h.reason else ""),
                clock_offset=offset,
                start_offset=f"{h.start_offset_s:+.2f} s" if h.start_offset_s is not None else "–",
                samples=h.samples,
                dropped=h.samples_dropped,
                complete=h.complete,
            )
        )
    return tuple(out)
