"""How a collective finding names ranks and who it blames: shared by its two sources.

The Flight Recorder findings (``diag.verdict.fr_findings``) and the NCCL log / RAS / GPU findings
(``diag.verdict.collectives``) word ranks the same way (``text.units.rank_set``), resolve a rank
to its PID the same way, and build ``sources.Finding``s with the same evidence limits; one place
for it keeps the report's wording consistent across sources.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

from diag.model import Evidence, ProcessInfo, Suspect
from diag.text.units import rank_set
from diag.verdict.sources import Finding
from diag.vocab import EvidenceSignal, Lean, ReportSection


def op_name(profiling_name: str) -> str:
    """``nccl:all_reduce`` → ``all_reduce`` (the backend prefix says nothing to a reader)."""
    return profiling_name.split(":", 1)[-1] or profiling_name


def ranks_text(ranks: Sequence[int]) -> str:
    return rank_set(ranks)


def suspect_list(rank: Optional[int], pid: Optional[int], host: str, reason: str) -> List[Suspect]:
    return [Suspect(pid=pid, rank=rank, host=host, reason=reason)] if pid is not None else []


def finding(
    signal: EvidenceSignal,
    detail: str,
    section: ReportSection,
    ranks: Iterable[Optional[int]] = (),
    suspects: Sequence[Suspect] = (),
    lean: Optional[Lean] = None,
) -> Finding:
    rank_tuple = tuple(r for r in ranks if r is not None)
    pids = tuple(s.pid for s in suspects)
    evidence = Evidence(
        signal=signal, detail=detail[:500], ranks=rank_tuple, pids=pids, section=section
    )
    return Finding(evidence, tuple(suspects), lean=lean)


def pid_of(processes: Sequence[ProcessInfo], rank: int, host: str = "") -> Optional[int]:
    for info in processes:
        if info.rank == rank and (info.host == host or not host):
            return info.pid
    return None
