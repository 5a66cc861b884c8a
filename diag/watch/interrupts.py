"""Stopping a watch cleanly: the one stop mechanism (``diag.commands.stopping``), with a
launched command's process group as where each signal is passed on first.

A watch must end with a final report on Ctrl-C or SIGTERM, never with a traceback and a half
written file: the handlers only record the request (and forward it), and the watch loop, which
sleeps on the request between samples, does the rest in its own time - as ``capture --pid``
does with the same ``StopRequest``.
"""

from __future__ import annotations

from typing import Optional

from diag.commands.stopping import StopRequest, StopSignals
from diag.watch.launch import LaunchedCommand

__all__ = ["SignalForwarding", "StopRequest"]


class SignalForwarding(StopSignals):
    """SIGINT/SIGTERM/SIGHUP request a stop, forwarded to the child's group first. (SIGHUP: a
    closed terminal would have hung up on the command too; its own session keeps it from
    getting one, so diag passes it on rather than leave it orphaned.) Each further signal is
    forwarded again (a second Ctrl-C to a server that ignores the first behaves as without
    diag)."""

    def __init__(self, stop: StopRequest, child: Optional[LaunchedCommand] = None) -> None:
        super().__init__(stop, self._to_child)
        self.child = child  # set once the command is started (a signal before: stop only)

    def _to_child(self, signum: int) -> None:
        if self.child is not None:
            self.child.forward(signum)
