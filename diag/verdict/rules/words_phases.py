"""The sentences of ``alone_in_phase`` and ``silence_within_rhythm`` (``diag.verdict.long_phase``
and ``diag.verdict.rhythm`` write their verdicts)."""

from __future__ import annotations

LONE_PHASE_OUTRANKS = (
    "one rank writing while every other rank waits for it is a phase of that rank (a "
    "download, a save, a compression), not the job's progress"
)

SILENCE_OUTRANKS = (
    "a silence shorter than the job's own beat is no hang, whatever its ranks wait on: only a "
    "capture that outlasts the beat can call one"
)

MEMORY_OUTRANKS = (
    "a rank its memory limit keeps in reclaim sets the job's pace, whatever its output or its "
    "peers' waits say"
)
