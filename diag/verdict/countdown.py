"""Until when: which framework clock ends a wait on peers, and when (issue #33).

Why: the next question after "how long has it been like this" is "if I wait, does it end -
or does the framework kill it first?". A collective waits only as long as its process group's
timeout (gloo raises in the waiting rank; NCCL's watchdog aborts). Those clocks are data in
the packs (``Clock`` with ``starts="collective"``, recognised by the backend's own threads);
the wait's age comes from the kernel (``wait_age``). Together: "torch.distributed's gloo
collective timeout (30 min, its default) fails the waiting ranks in ~16 min", or, past its
budget, that it did not fire (set longer, or off) and nothing ends the wait by itself.

The budget read is the clock's default unless argv/env set it: a ``timeout=`` passed in code
is not visible in a stack, and the sentence says which default it assumed.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.frameworks.base import Clock
from diag.model import Bundle, RankPhase
from diag.verdict.features import ProcSignals
from diag.verdict.startup_signs import eta_words
from diag.verdict.startup_timeouts import timeouts_of
from diag.verdict.wait_age import WaitAge, age_words
from diag.verdict.waits import PEER
from diag.vocab import VerdictState

_COLLECTIVE_CLOCKS: Tuple[Clock, ...] = tuple(
    c for _, c in union.CLOCKS if c.starts == "collective" and c.default_s and c.thread_prefixes
)
_STATES: Tuple[VerdictState, ...] = ("deadlocked", "idle", "slow")


class _Running(NamedTuple):
    clock: Clock
    budget_s: float
    set_by: str  # "`DEEPSPEED_TIMEOUT=45`", "" for the default


def _running_clocks(bundle: Bundle, parts: Sequence[ProcSignals]) -> Dict[str, _Running]:
    """The collective clocks of the ranks that wait on a peer, by the backend threads they run,
    each with its budget as the rank's argv/env set it. A framework's own default for its
    process group set by env (DeepSpeed's ``DEEPSPEED_TIMEOUT``) replaces torch's defaults."""
    infos = {p.info.pid: p.info for p in parts if p.main_family == PEER}
    if not infos or not bundle.samples:
        return {}
    found: Dict[str, _Running] = {}
    for ps in bundle.samples[-1].processes:
        if ps.pid not in infos:
            continue
        names = {t.name for t in ps.threads}
        read = {t.who: t for t in timeouts_of(infos[ps.pid])}
        for clock in _COLLECTIVE_CLOCKS:
            if not any(n.startswith(clock.thread_prefixes) for n in names):
                continue
            t = read.get(clock.name)
            if t is None and (clock.implied or clock.env or clock.argv_flag):
                continue  # a clock its argv/env (or its framework) turns on, and nothing does
            budget = t.seconds if t is not None and t.seconds else float(clock.default_s or 0.0)
            found[clock.name] = _Running(clock, budget, t.set_by if t is not None else "")
    if any(r.set_by for r in found.values()):  # set for the process group: defaults are not
        found = {k: r for k, r in found.items() if r.set_by}
    return found


def _eta_s(phases: Sequence[RankPhase]) -> Optional[float]:
    etas = [ph.eta_s for ph in phases if ph.eta_s is not None]
    return max(etas) if etas else None


def countdown(
    state: VerdictState,
    bundle: Bundle,
    parts: Sequence[ProcSignals],
    age: WaitAge,
    phases: Sequence[RankPhase] = (),
) -> str:
    """The verdict's tail about the clocks that end the peers' wait ("" when none applies)."""
    if state not in _STATES or age.for_s is None:
        return ""
    clocks = _running_clocks(bundle, parts)
    lines: List[str] = []
    eta = _eta_s(phases)
    for clock, budget_s, set_by in sorted(clocks.values(), key=lambda r: r.budget_s):
        budget = budget_s * clock.late_factor
        left = budget - age.for_s
        what = f"{clock.name} ({age_words(budget)}, its default; {clock.knob} sets it)"
        if set_by:
            what = f"{clock.name} ({age_words(budget)}, set by {set_by})"
        verb = "kills the job" if clock.action == "kills" else "fails the waiting ranks"
        if left <= 0:
            lines.append(
                f"{what} should have ended this {age_words(-left)} ago: it is set longer or "
                "off, so nothing ends the wait by itself"
            )
        elif state == "slow" and eta is not None:
            verdict = "it will make it" if eta < left else "it fires first: raise it"
            lines.append(f"{what} leaves {eta_words(left)} against an ETA of {eta_words(eta)}: "
                         f"{verdict}")  # fmt: skip
        else:
            lines.append(f"{what} {verb} in {eta_words(left)}")
    return "; " + "; ".join(lines) if lines else ""
