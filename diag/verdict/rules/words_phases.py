"""The sentence of ``alone_in_phase`` (``diag.verdict.long_phase`` writes its verdict)."""

from __future__ import annotations

LONE_PHASE_OUTRANKS = (
    "one rank writing while every other rank waits for it is a phase of that rank (a "
    "download, a save, a compression), not the job's progress"
)
