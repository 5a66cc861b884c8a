"""How long the waiting ranks have waited: "ranks 1-3 have not run for 14 min 3 s (since
03:12:09)", from the kernel at the first sample (issue #33).

Why: the capture lasts seconds, the hang may be an hour old; the person at the terminal asks
"how long has it been like this" before anything else, and a framework's clock (a watchdog, a
collective timeout) counts from that moment. ``ThreadSample.off_cpu_s`` (the main thread's
time off the CPU, from ``/proc/P/task/T/sched``'s ``se.exec_start``) gives it without waiting.

A main thread that woke during the capture (a timed wait's poll, a heartbeat in it) has a
short age: the line is then left out rather than understating - the capture shows the quiet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from diag.model import Bundle, main_thread
from diag.text.units import rank_set
from diag.verdict.features import ProcSignals
from diag.vocab import VerdictState

# A wait shorter than this is not worth a line (the capture's own window says as much).
MIN_AGE_S = 10.0
_STATES: Tuple[VerdictState, ...] = ("deadlocked", "idle", "slow")


@dataclass(frozen=True)
class WaitAge:
    """The waiting participants' shortest time off the CPU at the last sample."""

    tail: str  # " - ranks 1-3 have not run for 14 min 3 s (since 03:12:09)"
    since_s: Optional[float]  # epoch seconds
    for_s: Optional[float]


NONE = WaitAge("", None, None)


def age_words(seconds: float) -> str:
    """``14 min 3 s``, ``2 h 5 min``, ``45 s``: an age read from the kernel, not an estimate."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def clock_words(epoch_s: float) -> str:
    """``03:12:09`` in the host's local time (what its logs print)."""
    return time.strftime("%H:%M:%S", time.localtime(epoch_s))


def wait_age(
    state: VerdictState, bundle: Bundle, parts: Sequence[ProcSignals], working: Sequence[int]
) -> WaitAge:
    """The line for the waiting participants (not ``working``: pids the verdict found at work)."""
    if state not in _STATES or not bundle.samples:
        return NONE
    last = bundle.samples[-1]
    ages: List[Tuple[float, Optional[int], int]] = []
    # When each waiter last ran, on the wall clock: its age counts back from when its threads
    # were read (``ProcessSample.t_s``), a second or more into the sample on a loaded host.
    last_ran: List[float] = []
    waiting = {p.info.pid for p in parts if p.info.pid not in set(working)}
    for ps in last.processes:
        if ps.pid not in waiting or ps.status != "alive":
            continue
        main = main_thread(ps)
        if main is None or main.off_cpu_s is None or main.state == "R":
            continue
        ages.append((main.off_cpu_s, _rank_of(parts, ps.pid), ps.pid))
        last_ran.append((ps.t_s or last.t_s) - main.off_cpu_s)
    if not ages:
        return NONE
    shortest = min(a for a, _, _ in ages)
    if shortest < MIN_AGE_S:
        return NONE
    ranks = [r for _, r, _ in ages if r is not None]
    who = rank_set(ranks) if len(ranks) == len(ages) else _pids(ages)
    verb = "has" if len(ages) == 1 else "have"
    since = max(last_ran)
    tail = f" - {who} {verb} not run for {age_words(shortest)} (since {clock_words(since)})"
    return WaitAge(tail, round(since, 3), round(shortest, 3))


@dataclass(frozen=True)
class StoppedAge:
    """How long a stopped process has been stopped, at least, at the last sample."""

    for_s: float
    since_s: float  # epoch seconds


def stopped_age(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[StoppedAge]:
    """The shortest time off the CPU of the stopped processes' threads at their last sample.

    Why it dates the stop: SIGSTOP (a tracer's stop, a freezer's too) wakes every thread of
    the process to stop itself, so each ran at that moment and not since; the thread that ran
    last (a floor: one asleep in D state stops only when its wait ends) says "stopped for at
    least". None when the kernel's ``se.exec_start`` was not read."""
    keys = {p.key for p in procs}
    best: Optional[StoppedAge] = None
    for sample in reversed(bundle.samples):
        for ps in sample.processes:
            if (ps.host, ps.pid) not in keys or ps.state not in ("T", "t"):
                continue
            keys.discard((ps.host, ps.pid))
            ages = [t.off_cpu_s for t in ps.threads if t.off_cpu_s is not None]
            if not ages or min(ages) <= 0:
                continue
            read_s = ps.t_s or sample.t_s  # when its threads were read: their age counts from it
            age = StoppedAge(round(min(ages), 3), round(read_s - min(ages), 3))
            best = age if best is None or age.for_s < best.for_s else best
    return best


def stopped_words(age: Optional[StoppedAge]) -> str:
    """`` for ≥ 2 min 10 s (since 03:12:09)``, or "" where the kernel did not say."""
    if age is None:
        return ""
    return f" for ≥ {age_words(age.for_s)} (since {clock_words(age.since_s)})"


def _rank_of(parts: Sequence[ProcSignals], pid: int) -> Optional[int]:
    return next((p.info.rank for p in parts if p.info.pid == pid), None)


def _pids(ages: Sequence[Tuple[float, Optional[int], int]]) -> str:
    pids = sorted(pid for _, _, pid in ages)
    head = ", ".join(str(p) for p in pids[:4]) + (", ..." if len(pids) > 4 else "")
    return ("pid " if len(pids) == 1 else "pids ") + head
