"""Run calls one after another on one thread, each under its own timeout, skipping a hung one.

Why one thread: the per-process reads are Python code, and threads of one process take turns
on its interpreter lock (paying for each hand-over), so N reads on N threads cost more than N
reads in a row. Why a watchdog: a /proc read can block for good (a process stuck in D state),
and one such read must cost its timeout, not the rest of the sample. When a call overruns, its
thread is abandoned (a daemon thread: it never blocks diag's exit; it stops after the stuck
call) and a fresh thread goes on with the calls after it.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

K = TypeVar("K")
V = TypeVar("V")
DEADLINE_PASSED = "the deadline of the whole row passed first"


class _Lane(Generic[K, V]):
    def __init__(self, keys: Sequence[K], call: Callable[[K], V]) -> None:
        self.events: queue.Queue[Tuple[str, K, object]] = queue.Queue()
        self.cancelled = False
        self._keys = list(keys)
        self._call = call
        threading.Thread(target=self._run, name="serial-lane", daemon=True).start()

    def _run(self) -> None:
        for key in self._keys:
            if self.cancelled:
                return
            self.events.put(("start", key, time.monotonic()))
            try:
                value: object = self._call(key)
                self.events.put(("done", key, value))
            except BaseException as exc:  # the caller records it; the lane goes on
                self.events.put(("error", key, exc))


def run_serial(
    keys: Sequence[K],
    call: Callable[[K], V],
    timeout_s: float,
    deadline: Optional[float] = None,
) -> Tuple[Dict[K, V], Dict[K, str]]:
    """``call(key)`` for each key in order; values, and for the keys without one, why.

    ``deadline`` (``time.monotonic()``): when the whole row must end (a sample must end even
    when every process hangs in turn); the call running then and those after it are given up."""
    values: Dict[K, V] = {}
    failed: Dict[K, str] = {}
    todo: List[K] = list(keys)
    end = deadline if deadline is not None else float("inf")
    while todo:
        lane: _Lane[K, V] = _Lane(todo, call)
        current: Optional[K] = todo[0]
        started = time.monotonic()
        while current is not None:
            wait_until = min(started + timeout_s, end)
            try:
                kind, key, payload = lane.events.get(timeout=wait_until - time.monotonic())
            except (queue.Empty, ValueError):  # ValueError: a negative timeout
                lane.cancelled = True
                if wait_until >= end:
                    return values, _past_deadline(todo, values, failed)
                failed[current] = f"timed out after {timeout_s:g}s"
                break
            if kind == "start":
                current, started = key, float(payload)  # type: ignore[arg-type]
                continue
            if kind == "done":
                values[key] = payload  # type: ignore[assignment]
            else:
                failed[key] = f"{type(payload).__name__}: {payload}"
            at = todo.index(key) + 1
            current = todo[at] if at < len(todo) else None  # the next call, about to start
            started = time.monotonic()
        todo = [k for k in todo if k not in values and k not in failed]
    return values, failed


def _past_deadline(todo: Sequence[K], values: Dict[K, V], failed: Dict[K, str]) -> Dict[K, str]:
    for key in todo:
        if key not in values and key not in failed:
            failed[key] = DEADLINE_PASSED
    return failed
