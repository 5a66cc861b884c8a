"""The machine: a rank the kernel keeps from the CPU (its cgroup's limit, a low priority) is
slow, and the job waits at its pace (``diag.verdict.machine`` measures it)."""

from __future__ import annotations

from typing import Optional

from diag.model import Suspect
from diag.verdict.machine import (
    held_back,
    held_sentence,
    host_note,
    runnable_moving,
    runs_reason,
    runs_sentence,
    suspect_reason,
)
from diag.verdict.memory import hold_text, pressure_sentence, under_pressure
from diag.verdict.rules.base import Decision, decided
from diag.verdict.situation import Situation


def cpu_held_back(s: Situation) -> Optional[Decision]:
    """A live process runnable in most samples that its cgroup throttled in at least half of
    its periods, or that waited for a CPU half the time at a low priority, while it ran its
    own code (no spin in a wait): slow, named with the limit or the run-queue delay, and the
    peers waiting for it."""
    if s.intervals == 0:
        return None
    held = held_back(s.cpu_holds, [p for p in s.ctx.participants if not p.dead])
    if not held:
        return None
    alive = [p for p in s.ctx.participants if not p.dead]
    summary = held_sentence(held, alive, host_note(s.ctx.bundle))
    suspects = [
        Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=suspect_reason(hold, cause))
        for p, hold, cause in held
    ]
    return decided("slow", 0.8, summary, suspects)


def memory_pressure(s: Situation) -> Optional[Decision]:
    """A live process that faults pages back in or waits in reclaim while its memory cgroup
    sits at its limit with limit events growing (or memory pressure is high): slow, under
    memory pressure, with the figures (``diag.verdict.memory``)."""
    if s.intervals == 0:
        return None
    alive = [p for p in s.ctx.participants if not p.dead]
    held = under_pressure(s.ctx.bundle, alive)
    if not held:
        return None
    suspects = [
        Suspect(
            pid=p.pid, rank=p.rank, host=p.key[0], reason="under memory pressure: " + hold_text(h)
        )
        for p, h in held
    ]
    return decided("slow", 0.75, pressure_sentence(held, alive), suspects)


def spare_runnable(s: Situation, decision: Decision) -> Optional[Decision]:
    """A deadlocked decision whose suspects include a live process the kernel reports
    runnable and that moved (its run-queue delay grew faster than its CPU, or its stack
    changed while it ran, in no wait or poll loop): it is no deadlock but a slow process -
    runnable is not blocked. The slow decision that replaces it, or None to keep it."""
    if decision.state != "deadlocked" or s.intervals == 0:
        return None
    named = {(x.host, x.pid) for x in decision.suspects}
    alive = [p for p in s.ctx.participants if not p.dead]
    suspects = [p for p in alive if p.key in named]
    moving = runnable_moving(s.ctx.bundle, suspects)
    if not moving:
        return None
    summary = runs_sentence(moving, s.cpu_holds, alive, host_note(s.ctx.bundle))
    return decided(
        "slow",
        0.6,
        summary,
        [
            Suspect(pid=p.pid, rank=p.rank, host=p.key[0], reason=runs_reason(p, s.cpu_holds))
            for p in moving
        ],
    )
