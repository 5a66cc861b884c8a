"""Stopping a watch cleanly: the one stop mechanism (``diag.commands.stopping``), with a
launched command's process group as where each signal is passed on first.

A watch must end with a final report on Ctrl-C or SIGTERM, never with a traceback and a half
written file: the handlers only record the request (and forward it), and the watch loop, which
sleeps on the request between samples, does the rest in its own time - as ``capture --pid``
does with the same ``StopRequest``.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Optional

from diag.commands.stopping import StopRequest, StopSignals
from diag.watch.launch import LaunchedCommand

__all__ = ["SignalForwarding", "StopRequest"]


class SignalForwarding(StopSignals):
    """SIGINT/SIGTERM request a stop, forwarded to the child's group first. Each further signal
    is forwarded again (a second Ctrl-C to a server that ignores the first behaves as without
    diag).

    SIGHUP once the command runs is diag's terminal going away (an ssh session dropped, a
    window closed), not a request about the job: the job, in a session of its own, outlives
    its observer - it is not passed on - and diag watches on as under ``nohup``, its terminal
    output sent to /dev/null (``_leave_terminal``), so the log gets every line the job prints
    and the reports are written when it ends. Before the command started, SIGHUP stops."""

    def __init__(self, stop: StopRequest, child: Optional[LaunchedCommand] = None) -> None:
        super().__init__(stop, self._to_child)
        self.child = child  # set once the command is started (a signal before: stop only)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if signum == signal.SIGHUP and self.child is not None:
            _leave_terminal()
            return
        super()._handle(signum, frame)

    def _to_child(self, signum: int) -> None:
        if self.child is not None:
            self.child.forward(signum)


def _leave_terminal() -> None:
    """Point diag's stdout/stderr at /dev/null where they are a terminal (one that hung up
    fails every write with EIO): the tees and status lines then write on without failing. A
    file or pipe (``nohup diag ... > out``) is kept: someone may still read it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            try:
                if os.isatty(fd):
                    os.dup2(devnull, fd)
            except OSError:
                pass
    finally:
        os.close(devnull)
