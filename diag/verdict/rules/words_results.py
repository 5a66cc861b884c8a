"""The rules' words for waits on results (``results_never_come``): an event loop that waits on
itself, a pool whose busy workers all back off.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.backoff import Backoff
from diag.verdict.features import ProcSignals
from diag.verdict.wait_age import age_words
from diag.verdict.wording import verb, where, who


def loop_waits_on_itself(p: ProcSignals, coroutine: str) -> str:
    """``results_never_come``: an event loop's thread blocks on a result of its own loop."""
    return (
        f"{who([p])}'s event loop blocks in `Future.result` inside `{coroutine}`, on its own "
        "thread: the coroutine or callback that would set that future runs on this same loop, "
        "which cannot run again until the wait returns - it waits on itself (every other "
        "request of the loop waits too). Kill it; in the code, `await` the future "
        "(`asyncio.wrap_future`, or await the coroutine) instead of calling `.result()` in a "
        "coroutine"
    )


def loop_waits_on_itself_reason(coroutine: str) -> str:
    """A suspect of ``loop_waits_on_itself``."""
    return f"its event loop's thread blocks in `Future.result` inside `{coroutine}` on itself"


def pool_backs_off(waiters: Sequence[ProcSignals], backs: Sequence[Backoff]) -> str:
    """``results_never_come``, slow: the pool's busy workers all sleep in a timed wait that
    ends by itself (a rate limit, a back-off): the results come when they wake."""
    procs = [b.proc for b in backs]
    last = max(b.wakes_in_s for b in backs)
    line = next((b.line for b in backs if b.line), "")
    quoted = f' (its log: "{line}")' if line else ""
    return (
        f"{who(waiters)} {verb(waiters, 'waits', 'wait')} for results in {where(waiters[0])} "
        f"from {who(procs)}, which {verb(procs, 'sleeps', 'sleep')} in {where(procs[0])} "
        f"({backs[0].call}) and {verb(procs, 'wakes by itself', 'wake by themselves')} - the "
        f"last in ~{age_words(max(1.0, last))}{quoted}: a rate limit or back-off, not a lost "
        "task - wait, don't kill; if the sleeps are longer than they should be, see what sets "
        "them"
    )


def pool_backoff_reason(b: Backoff) -> str:
    """A pool worker's suspect line under ``pool_backs_off``."""
    budget = f" of {age_words(b.timeout_s)}" if b.timeout_s is not None else ""
    return (
        f"sleeps in {where(b.proc)} ({b.call}{budget}); wakes by itself in "
        f"~{age_words(max(1.0, b.wakes_in_s))} - the result its caller waits for comes after"
    )
