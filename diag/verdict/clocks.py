"""Until when, during start-up: the framework clocks that count while a job starts, read back
as a countdown beside its ETA (issue #33).

Why: "loading weights 43 %, ETA 4 min" answers half the question; the other half is whether
the framework lets it finish. SGLang's watchdog, torchrun's rendezvous join timeout, Ray
Train's worker-group start timeout count from a process's start; vLLM's engine-ready timeout
does not bound ``vllm serve``'s own start-up at all (its wait for the engine has no timeout;
only API-server processes of ``--api-server-count`` > 1 count it from their start). Each is a
``Clock`` of its pack, its budget read from the job's argv/env (``startup_timeouts``): "vLLM's
engine-ready timeout (900 s, set by `VLLM_ENGINE_READY_TIMEOUT_S=900`) does not count during
this start-up"; "SGLang's watchdog (700 s, set by `--watchdog-timeout=700`) fails start-up in
~9 min - after the ETA (~20 s): it will make it".

The count starts at the start of the process whose clock it is (the role it is a thread of,
else the oldest process carrying it): an upper bound on what is left when the framework
starts it later (after its imports).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

from diag.frameworks import union
from diag.model import Bundle, RankPhase
from diag.text.roles import framework_role
from diag.verdict.features import ProcSignals
from diag.verdict.readiness import ready_line
from diag.verdict.startup_signs import STARTUP_PHASES, eta_words
from diag.verdict.startup_timeouts import Timeout
from diag.verdict.wait_age import age_words

# Clocks whose count begins with a process (or its rendezvous round), by ``Clock.starts``.
_FROM_START = ("start", "join")
_CLOCKS = {c.name: c for _, c in union.CLOCKS}
_VERBS = {
    "fails_startup": "fails start-up",
    "kills": "kills it",
    "aborts": "aborts it",
    "restarts": "restarts it",
    "proceeds": "starts without the nodes still missing",
    "warns": "warns",
}


class Reading(NamedTuple):
    """One clock as it stands at the last sample."""

    who: str  # "vLLM's engine-ready timeout"
    knob: str  # "`VLLM_ENGINE_READY_TIMEOUT_S`"
    budget_s: float
    set_by: str  # "`VLLM_ENGINE_READY_TIMEOUT_S=900`", "" for the framework's default
    action: str
    starts: str  # what starts its count (``Clock.starts``)
    counts_now: bool  # whether it counts during start-up (``Clock.during_startup``)
    fires_in_s: Optional[float]  # from its process's start; None when unknown


def _origin_s(t: Timeout, owners: Sequence[ProcSignals]) -> Optional[float]:
    """When its count began: the start of the process it is a thread of, else the oldest."""
    clock = _CLOCKS.get(t.who)
    role = clock.thread_of if clock is not None else ""
    mine = [
        p
        for p in owners
        if role
        and (r := framework_role(p.info.cmdline, p.info.name)) is not None
        and r.role == role
    ] or list(owners)
    starts = [p.info.start_time_s for p in mine if p.info.start_time_s is not None]
    return min(starts) if starts else None


def startup_readings(
    bundle: Bundle, procs: Sequence[ProcSignals], timeouts: Dict[int, List[Timeout]]
) -> List[Reading]:
    """The clocks of ``timeouts`` (per pid, as ``startup_verdict`` read them) that count from
    a process's start, each with the time it has left at the last sample."""
    if not bundle.samples:
        return []
    now_s = bundle.samples[-1].t_s
    owners: Dict[str, List[ProcSignals]] = {}
    first: Dict[str, Timeout] = {}
    for p in procs:
        for t in timeouts.get(p.pid, []):
            starts_now = t.starts in _FROM_START or (t.starts == "step" and t.during_load)
            if t.seconds is None or not starts_now:
                continue
            owners.setdefault(t.who, []).append(p)
            first.setdefault(t.who, t)
    out = []
    for who, t in first.items():
        origin = _origin_s(t, owners[who])
        left = None if origin is None else origin + float(t.seconds or 0.0) - now_s
        budget = float(t.seconds or 0.0)
        out.append(Reading(who, t.knob, budget, t.set_by, t.action, t.starts, t.during_load, left))
    return out


def _phrase(r: Reading, eta_s: Optional[float]) -> str:
    by = f"set by {r.set_by}" if r.set_by else f"its default; {r.knob} sets it"
    head = f"{r.who} ({age_words(r.budget_s)}, {by})"
    if not r.counts_now:
        return f"{head} does not count during this start-up"
    if r.fires_in_s is None:
        return f"{head} {_VERBS.get(r.action, 'fires')} {age_words(r.budget_s)} after it began"
    text = f"{head} {_VERBS.get(r.action, 'fires')} in {eta_words(r.fires_in_s)}"
    if eta_s is not None:
        if eta_s < r.fires_in_s:
            text += f" - after the ETA ({eta_words(eta_s)}): it will make it"
        else:
            text += f" - before the ETA ({eta_words(eta_s)}): raise {r.knob}"
    return text


def startup_countdown(
    bundle: Bundle,
    procs: Sequence[ProcSignals],
    timeouts: Dict[int, List[Timeout]],
    phases: Sequence[RankPhase],
) -> str:
    """The verdict's tail beside a start-up's ETA: for a job in a start-up phase, or one that
    has not said it is ready (no ready line in its logs) and whose clock's process is younger
    than the clock's budget ("" otherwise: a job past its start-up has no such clock left)."""
    starting = [ph for ph in phases if ph.phase in STARTUP_PHASES]
    if not starting and ready_line(bundle):
        return ""
    etas = [ph.eta_s for ph in starting if ph.eta_s is not None]
    eta = max(etas) if etas else None
    parts = []
    for r in sorted(startup_readings(bundle, procs, timeouts), key=lambda r: r.budget_s):
        young = r.fires_in_s is not None and r.fires_in_s > 0
        if not starting and not (young and r.starts == "start"):
            continue
        if r.counts_now and not young and r.fires_in_s is not None:
            continue  # its budget passed with the job still here: it counts from later on
        parts.append(_phrase(r, eta))
    return "; " + "; ".join(parts[:3]) if parts else ""
