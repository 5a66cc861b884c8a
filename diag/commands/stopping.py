"""Stopping diag cleanly, one mechanism for every way it samples: ``capture --pid``, ``capture --
CMD`` and ``watch`` (and the Slurm node collector, whose controller says "stop").

SIGINT, SIGTERM and SIGHUP only *record* a stop request (and, in launch mode, pass the signal
on to the launched command first, so it reacts as if diag were not there - but for SIGHUP, diag's
terminal going away, which the job outlives: ``diag.watch.interrupts``); the sampling loop,
which sleeps on the request between samples, ends after the sample in flight, and the outputs
are written with what was taken. A second signal while they are written is only counted: it
must not lose them. Nothing here raises from a signal handler, so no write is ever cut in half.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Callable, Dict, Optional, Tuple, Type


class StopRequest:
    """Set when diag is asked to stop (a signal, the Slurm controller); loops sleep on it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signum: Optional[int] = None
        self.count = 0

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def set(self, signum: Optional[int] = None) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
        self._event.set()

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``; True as soon as a stop was requested."""
        return self._event.wait(max(timeout_s, 0.0))

    def by(self) -> str:
        """ " by SIGTERM" - for a note saying why the sampling ended early."""
        return f" by {signal.Signals(self.signum).name}" if self.signum else ""


class StopSignals:
    """Context manager: SIGINT/SIGTERM/SIGHUP set ``stop``, each first passed to ``forward``
    (a launched command's process group) when given. The previous handlers come back on exit.
    Outside the main thread (where Python cannot install handlers) it does nothing, and the
    caller keeps its own handling."""

    SIGNALS: Tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, stop: StopRequest, forward: Optional[Callable[[int], None]] = None) -> None:
        self.stop = stop
        self.forward = forward
        self._previous: Dict[int, object] = {}

    def _handle(self, signum: int, _frame: Optional[FrameType]) -> None:
        if self.forward is not None:
            self.forward(signum)
        self.stop.set(signum)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self.stop

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()
