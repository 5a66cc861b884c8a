"""Run probes under a hard timeout so one hung source never loses a snapshot.

A read of /proc/P/cmdline can block on a process stuck in D state, NVML can hang on a wedged
driver, py-spy can hang in waitpid. Each probe call therefore runs on its own daemon thread
(abandoned, not joined, if it overruns: a daemon thread never blocks diag's exit) and its
failure - exception or timeout - becomes a ``ProbeFailure`` record instead of an exception.
Subprocess-based probes (py-spy, NVML) also pass the timeout to the subprocess and kill it.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Generic, List, Optional, Sequence, TypeVar

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


def run_all(calls: Sequence[ProbeCall[T]]) -> List[ProbeResult[T]]:
    """Start every call on its own thread (a ``bounded`` one runs in this thread once the
    others are started), wait for each up to its own timeout, in order."""
    started = time.monotonic()
    boxes: List[Dict[str, object]] = [{} for _ in calls]
    threads: List[Optional[threading.Thread]] = []
    for call, box in zip(calls, boxes):
        started_thread: Optional[threading.Thread] = None
        if not call.bounded:
            started_thread = threading.Thread(
                target=_target, args=(call, box), name=f"probe-{call.probe}", daemon=True
            )
            started_thread.start()
        threads.append(started_thread)
    for call, box in zip(calls, boxes):
        if call.bounded:
            _target(call, box)

    results: List[ProbeResult[T]] = []
    for running, call, box in zip(threads, calls, boxes):
        if running is not None:
            remaining = call.timeout_s - (time.monotonic() - started)
            running.join(max(remaining, 0.0))
            if running.is_alive():
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


def run_one(call: ProbeCall[T]) -> ProbeResult[T]:
    return run_all([call])[0]
