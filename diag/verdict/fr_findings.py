"""Flight Recorder records -> findings: who lags, who is missing, which op never started.

Sequence ids count per process group, so within a group the rank whose last enqueued
collective lags the others never entered the next one ("rank 2 never entered all_reduce #4") -
it is the suspect, the others are waiting for it. All ranks at the same id with one that
enqueued but never *started* it (NCCL records start) points at that rank's GPU; ranks at the
same id in different collectives (barrier vs all_reduce) never match. A module of its own
because it is the richest of the collective sources and the one reasoning about sequence ids.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from diag.model import ProcessInfo, RankCollectives, Suspect
from diag.verdict.collective_evidence import finding, op_name, pid_of, ranks_text, suspect_list
from diag.verdict.sources import STUCK, Finding


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
                f"collective is {last_text} while {ranks_text(leaders)} reached #{top}"
            )
            pid = rec.pid if rec.pid is not None else pid_of(processes, rec.rank, rec.host)
            suspects = suspect_list(rec.rank, pid, rec.host, detail)
            out.append(finding("fr-lag", detail, "collectives", [rec.rank], suspects, STUCK))
        expected = {r for rec in recs for r in rec.pg_ranks}
        absent = sorted(expected - set(seqs))
        if absent and len(seqs) > 0:
            detail = (
                f"no Flight Recorder dump from {ranks_text(absent)}{pg_text} "
                f"while {ranks_text(sorted(seqs))} wrote one"
            )
            out.append(finding("fr-missing", detail, "collectives", absent))
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
            pid = rec.pid if rec.pid is not None else pid_of(processes, rank, rec.host)
            detail = (
                f"rank {rank} enqueued {op} #{seq}{pg_text} but it never started on its GPU "
                f"while {ranks_text(sorted(started))} started it: its stream is blocked"
            )
            suspects = suspect_list(rank, pid, rec.host, detail)
            out.append(finding("fr-not-started", detail, "collectives", [rank], suspects, STUCK))
        return out
    completed = [rec for rec in recs if rec.last_completed_seq is not None]
    if completed and all((rec.last_completed_seq or 0) < seq for rec in completed):
        detail = (
            f"all {len(recs)} ranks entered {op} #{seq}{pg_text} and none completed it: the "
            "collective itself is stuck (network, a peer outside this dump, or a GPU fault)"
        )
        ranks = sorted(rec.rank for rec in recs)
        return [finding("fr-all-waiting", detail, "collectives", ranks, lean=STUCK)]
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
            f"{ranks_text(ranks)} entered {kind} #{seq}{pg_text} while "
            f"{ranks_text(major_ranks)} entered {majority} #{seq}: mismatched collectives "
            "never complete"
        )
        suspects: List[Suspect] = []
        if len(ranks) < len(major_ranks):  # a tie names nobody: either side may be wrong
            for rank in ranks:
                rec = next(r for r in recs if r.rank == rank)
                pid = rec.pid if rec.pid is not None else pid_of(processes, rank, rec.host)
                suspects += suspect_list(rank, pid, rec.host, detail)
        out.append(finding("fr-mismatch", detail, "collectives", ranks, suspects, STUCK))
    return out
