"""What start-up adds to a verdict: its phases, the warnings (a framework timeout that fires
before a load ends; a job starting up that reads stuck) and the tail of its sentence. The
classifier joins them to the deciding sentence (``startup_parts``): the summary is composed
once.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from diag.model import Bundle, RankPhase
from diag.text.roles import framework_role
from diag.verdict.clocks import startup_countdown
from diag.verdict.features import ProcSignals
from diag.verdict.startup import StartupPhases, _label, phase_phrase, startup_phases
from diag.verdict.startup_signs import (
    STARTUP_PHASES,
)
from diag.verdict.startup_timeouts import (
    Timeout,
    _hang_tail,
    _load_warnings,
    job_wide,
    step_watchdog_blocked,
    timeouts_of,
)
from diag.verdict.wording import who
from diag.vocab import VerdictState


class StartupParts(NamedTuple):
    """What start-up adds to a verdict: the phases, warnings (a timeout that fires before a
    load ends, a job starting up that reads stuck) and the tail of its sentence (the phases of
    a slow job, the kill budget of a hung one)."""

    phases: Tuple[RankPhase, ...]
    warnings: Tuple[str, ...]
    tail: str


def startup_parts(
    state: VerdictState,
    bundle: Bundle,
    procs: Sequence[ProcSignals],
    measured: Optional[StartupPhases] = None,
) -> StartupParts:
    """The start-up phases, ETA and timeout warnings of a verdict of ``state``. The
    classifier appends ``tail`` to the deciding sentence: the summary is composed once.
    ``measured``: ``procs``' phases as the situation measured them (else measured here)."""
    if state == "exited" or not bundle.samples:
        return StartupParts((), (), "")
    phases, elapsed = measured if measured is not None else startup_phases(bundle, procs)
    now_s = bundle.samples[-1].t_s
    timeouts: Dict[int, List[Timeout]] = {p.pid: timeouts_of(p.info) for p in procs if not p.dead}
    job_wide(timeouts, procs)
    names = {p.pid: who([p]) for p in procs if framework_role(p.info.cmdline, p.info.name)}
    warnings: List[str] = []
    for phase in phases:
        if phase.phase in STARTUP_PHASES:
            warnings += _load_warnings(
                phase, elapsed.get(phase.pid), timeouts.get(phase.pid, []), now_s, names
            )
    tail = ""
    starting = [r for r in phases if r.phase in STARTUP_PHASES]
    if state in ("slow", "progressing") and starting:
        tail += "; " + "; ".join(phase_phrase(r, names) for r in starting[:2])
        if len(starting) > 2:
            tail += f" (+{len(starting) - 2} more)"
    if state in ("slow", "progressing"):
        tail += startup_countdown(bundle, procs, timeouts, phases)  # ... and its clocks
    elif state in ("deadlocked", "idle", "unknown"):
        moving = [r for r in starting if r.eta_s is not None]
        if moving:
            first = moving[0]
            warnings.append(
                f"{_label(first, names)} is {first.phase} and moving ({first.basis}): the job is "
                "starting up, not stuck"
            )
    if state == "deadlocked":
        unique: Dict[Tuple[str, Optional[float], Optional[float]], Timeout] = {}
        for items in timeouts.values():
            for t in items:
                unique.setdefault((t.who, t.seconds, t.deadline_s), t)
        tail += _hang_tail(list(unique.values()), now_s, step_watchdog_blocked(bundle, procs))
    return StartupParts(tuple(phases), tuple(warnings), tail)
