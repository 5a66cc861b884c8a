"""Idle only when ready: "healthy, waiting for work" needs evidence the job finished starting.

The misread this guards against: a server still starting - its API process and its engine
both parked for a moment between two compile steps (or two shards, or warm-up requests), no
ready line yet, nothing served - looks exactly like a ready server waiting for requests: every
thread in a poll, a port listening. A user told "idle, healthy" sends it requests and waits.
So a job in which a start-up phase is seen (``diag.verdict.startup``: loading, converting,
compiling, initialising communication, downloading, warming up) is idle only with evidence
that it is ready:

- a ready line in a log it writes ("The server is fired up and ready to roll!", "Application
  startup complete", "Uvicorn running on", "ready to serve", "listening on");
- a request answered during the capture (its served connections moved data, whoever sent it).

A listening port alone is not that evidence: servers open their port before their warm-up
(SGLang's ``/health`` answers 503 until its own warm-up request ends). Without it the job
stays in its start-up phase: slow, with the phase and what it waits for.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from diag.frameworks import union
from diag.model import Bundle, RankPhase
from diag.verdict.features import ProcSignals
from diag.verdict.startup_signs import STARTUP_PHASES
from diag.verdict.work import answers

READY_LINE = union.READY_LINE  # every pack's ``ready_lines``, one alternation


def ready_line(bundle: Bundle) -> str:
    """The first line of any log the capture read that says the job is ready, or ""."""
    for sample in bundle.samples:
        for log in sample.logs:
            for line in (*log.head, *log.tail):
                if READY_LINE.search(line):
                    return line.strip()
    return ""


def starting(phases: Sequence[RankPhase]) -> List[RankPhase]:
    """The processes seen in a start-up phase in this capture (of ``startup_phases``)."""
    return [r for r in phases if r.phase in STARTUP_PHASES]


def not_ready(
    bundle: Bundle, procs: Sequence[ProcSignals], all_phases: Sequence[RankPhase]
) -> Optional[List[RankPhase]]:
    """The start-up phases of a job that shows no sign of being ready, or None: ready (a ready
    line, a request answered) or not starting at all. ``all_phases``: its processes' phases,
    measured once (``Situation.startup``)."""
    phases = starting(all_phases)
    if not phases or any(answers(p) for p in procs if not p.dead):
        return None
    return None if ready_line(bundle) else phases
