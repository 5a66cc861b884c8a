"""The seam for evidence sources beyond CPU, stacks, I/O and logs: a context in, findings out.

``classify`` derives its core verdict from CPU, stacks, I/O, memory and logs. Other sources
(NVML today; Flight Recorder, NCCL logs and RAS from the GPU/NCCL work) plug in as functions
``Context -> Iterable[Finding]``, listed in order in ``classify.EVIDENCE_SOURCES`` and passed to
``run_sources`` (nothing registers itself on import). A finding adds evidence and
suspects, and may *lean* the verdict: ``"stuck"`` (busy-looking but not progressing, e.g. a GPU
at 100% util and idle power), ``"work"`` (real work the CPU view cannot see, e.g. a GPU at full
power) or ``"progress"`` (a counter advanced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final, Iterable, List, Optional, Sequence, Tuple

from diag.model import Bundle, Evidence, Suspect
from diag.verdict.features import ProcSignals
from diag.verdict.progress import LogGrowth
from diag.vocab import Lean

STUCK: Final = "stuck"
WORK: Final = "work"
PROGRESS: Final = "progress"


@dataclass(frozen=True)
class Context:
    """What evidence sources may read: the bundle and the features already extracted."""

    bundle: Bundle
    procs: List[ProcSignals]
    participants: List[ProcSignals]
    logs: List[LogGrowth]


@dataclass(frozen=True)
class Finding:
    evidence: Evidence
    suspects: Tuple[Suspect, ...] = ()
    lean: Optional[Lean] = None


EvidenceSource = Callable[[Context], Iterable[Finding]]


def run_sources(ctx: Context, sources: Sequence[EvidenceSource]) -> List[Finding]:
    """Run each source in order; a failing source is recorded, never fatal."""
    out: List[Finding] = []
    for source in sources:
        try:
            out.extend(source(ctx))
        except Exception as exc:  # a bug in one source must not cost the verdict
            name = getattr(source, "__name__", "source")
            out.append(
                Finding(
                    Evidence(
                        signal="evidence-error",
                        detail=f"{name} failed: {type(exc).__name__}: {exc}",
                    )
                )
            )
    return out
