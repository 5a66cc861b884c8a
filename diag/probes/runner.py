"""Run probes under a hard timeout so one hung source never loses a snapshot.

A read of /proc/P/cmdline can block on a process stuck in D state, NVML can hang on a wedged
driver, py-spy can hang in waitpid. Each probe call therefore runs on its own daemon thread
(abandoned, not joined, if it overruns: a daemon thread never blocks diag's exit) and its
failure - exception or timeout - becomes a ``ProbeFailure`` record instead of an exception.
Subprocess-based probes (py-spy, NVML) also pass the timeout to the subprocess and kill it.

The threads are kept for the next calls once their call returns (a watch samples every few
seconds, and starting a thread waits for it to be scheduled: a fifth of a 1-second watch's
CPU went to starting threads); one whose call hangs is simply never given another.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

from diag.model import ProbeFailure

T = TypeVar("T")


class ProbeError(Exception):
    """Raised by a probe for an expected failure; the message becomes the recorded reason."""


class ProbeResult(Generic[T]):
    __slots__ = ("duration_s", "failure", "value")

    def __init__(
        self, value: Optional[T], failure: Optional[ProbeFailure], duration_s: float
    ) -> None:
        self.value = value
        self.failure = failure
        self.duration_s = duration_s


class ProbeCall(Generic[T]):
    """A probe invocation waiting to run: what to call, its name and the PID it concerns.

    ``bounded``: the call keeps its own deadline (it only waits with timeouts, as the shard
    pool's ``collect`` does), so ``run_all`` runs it in the calling thread once the others are
    started: no thread to start, and it begins at once instead of when the scheduler gets to a
    new thread (several ms while forked workers hold both cores)."""

    __slots__ = ("bounded", "fn", "pid", "probe", "timeout_s")

    def __init__(
        self,
        probe: str,
        fn: Callable[[], T],
        timeout_s: float,
        pid: Optional[int] = None,
        bounded: bool = False,
    ) -> None:
        self.probe = probe
        self.fn = fn
        self.timeout_s = timeout_s
        self.pid = pid
        self.bounded = bounded


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ProbeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _target(call: ProbeCall[T], box: Dict[str, object]) -> None:
    t0 = time.monotonic()
    try:
        box["value"] = call.fn()
    except BaseException as exc:
        box["error"] = exc
    box["duration_s"] = time.monotonic() - t0


_Job = Tuple[ProbeCall[Any], Dict[str, object], threading.Event]
_MAX_IDLE = 16


class _Runner:
    """A daemon thread that runs probe calls one at a time and waits in ``_idle`` between."""

    _idle: List[_Runner] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="probe", daemon=True).start()

    @classmethod
    def run(cls, call: ProbeCall[Any], box: Dict[str, object]) -> threading.Event:
        """Start ``call`` on an idle runner (or a new one); the event is set when it returns."""
        with cls._lock:
            runner = cls._idle.pop() if cls._idle else None
        done = threading.Event()
        (runner or cls())._jobs.put((call, box, done))
        return done

    def _loop(self) -> None:
        while True:
            call, box, done = self._jobs.get()
            _target(call, box)
            # An idle thread must not keep the last call alive (its function may hold a
            # Collector, whose finalizer ends the shard workers).
            del call, box
            with self._lock:
                if len(self._idle) >= _MAX_IDLE:
                    done.set()
                    return
                self._idle.append(self)
            done.set()
            del done


def standby(count: int) -> None:
    """Have at least ``count`` idle runners waiting. Why: a thread started during a sampling
    burst runs at the normal priority (``collect.priority`` raises diag's threads with
    ``SCHED_RESET_ON_FORK``, which a new thread does not keep), so the Collector starts the
    ones its probes will use before the burst raises them."""
    with _Runner._lock:
        missing = count - len(_Runner._idle)
    for _ in range(missing):
        runner = _Runner()
        with _Runner._lock:
            _Runner._idle.append(runner)


def _forget_runners() -> None:
    """A forked child has none of its parent's threads (nor a usable copy of a lock another
    thread may have held): it starts its own."""
    _Runner._idle = []
    _Runner._lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_runners)


def run_all(calls: Sequence[ProbeCall[T]]) -> List[ProbeResult[T]]:
    """Run every call on a thread of its own (a ``bounded`` one in this thread once the
    others are started), wait for each up to its own timeout, in order."""
    started = time.monotonic()
    boxes: List[Dict[str, object]] = [{} for _ in calls]
    running: List[Optional[threading.Event]] = [
        None if call.bounded else _Runner.run(call, box) for call, box in zip(calls, boxes)
    ]
    for call, box in zip(calls, boxes):
        if call.bounded:
            _target(call, box)

    results: List[ProbeResult[T]] = []
    for done, call, box in zip(running, calls, boxes):
        if done is not None and not done.wait(
            max(call.timeout_s - (time.monotonic() - started), 0.0)
        ):
            reason = f"timed out after {call.timeout_s:g}s"
            failure = ProbeFailure(
                probe=call.probe, reason=reason, duration_s=call.timeout_s, pid=call.pid
            )
            results.append(ProbeResult(None, failure, call.timeout_s))
            continue
        duration_s = float(box.get("duration_s", 0.0))  # type: ignore[arg-type]
        if "error" in box:
            failure = ProbeFailure(
                probe=call.probe,
                reason=_describe(box["error"]),  # type: ignore[arg-type]
                duration_s=round(duration_s, 4),
                pid=call.pid,
            )
            results.append(ProbeResult(None, failure, duration_s))
        else:
            results.append(ProbeResult(box.get("value"), None, duration_s))  # type: ignore[arg-type]
    return results
