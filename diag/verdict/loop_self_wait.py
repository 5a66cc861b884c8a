"""An event loop that blocks on a result only it could produce.

A coroutine that calls ``.result()`` on a ``concurrent.futures.Future`` - the one
``asyncio.run_coroutine_threadsafe(coro, loop)`` returns when called on the loop's own
thread, or any future a callback of the same loop would complete - blocks the loop's thread
in ``Future.result``. The coroutine or callback that would set it is scheduled on that same
loop, which cannot run again until the wait returns: a deadlock of one thread on itself. A
pool's future is different only while a thread of the pool works on it: with every other
thread of the process idle (a pool worker waiting for a task) or absent, no thread will.
"""

from __future__ import annotations

from typing import Optional

from diag.model import Bundle, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of, thread_wait
from diag.verdict.waits import RESULT, runs_coroutines

# The other threads' waits that set no future: a pool worker waiting for a task.
_IDLE = frozenset({"queue"})


def loop_waits_on_itself(bundle: Bundle, p: ProcSignals) -> Optional[str]:
    """The coroutine frame in which ``p``'s event-loop thread blocks on a result that only its
    own loop could produce, or None. The wait must hold at every sample of the process."""
    seen = process_samples(bundle, p.key[0], p.pid)
    if not seen:
        return None
    caller = ""
    for ps in seen:
        main = main_thread(ps)
        if main is None:
            return None
        w = thread_wait(bundle, main)
        if w.kind != RESULT or not runs_coroutines(frames_of(bundle, main.stack_id)):
            return None
        if any(t.tid != main.tid and thread_wait(bundle, t).kind not in _IDLE for t in ps.threads):
            return None  # another thread might complete it
        caller = w.caller
    return caller or "a coroutine"
