"""Stopping diag cleanly: SIGINT/SIGTERM become a stop request, forwarded to a launched child.

A watch must end with a final report on Ctrl-C or SIGTERM, never with a traceback and a half
written file: the handlers only record the request (and forward it), and the watch loop, which
sleeps on the request between samples, does the rest in its own time.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Dict, Optional, Type

from diag.watch.launch import LaunchedCommand


class StopRequest:
    """Set when diag is asked to stop (SIGINT/SIGTERM); the watch loop sleeps on it."""

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


class SignalForwarding:
    """Context manager: SIGINT/SIGTERM/SIGHUP request a stop, forwarded to the child's group
    first. (SIGHUP: a closed terminal would have hung up on the command too; its own session
    keeps it from getting one, so diag passes it on rather than leave it orphaned.)

    Forwarding happens inside the handler, before diag does anything else, so the child reacts
    as if diag were not there. Each further signal is forwarded again (a second Ctrl-C to a
    server that ignores the first behaves as without diag). Outside the main thread (where
    Python cannot install handlers) it does nothing, and the caller keeps its own handling.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, stop: StopRequest, child: Optional[LaunchedCommand] = None) -> None:
        self.stop = stop
        self.child = child
        self._previous: Dict[int, object] = {}

    def _handle(self, signum: int, _frame: Optional[FrameType]) -> None:
        if self.child is not None:
            self.child.forward(signum)
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
