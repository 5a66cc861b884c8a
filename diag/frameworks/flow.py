"""A framework's own flow control or admission pause, as data: ``FlowPause``.

Why a record of its own: a stream writer that waits for its peer to read (gRPC's HTTP/2 flow
control) or a worker that paused itself under memory pressure (Dask's memory monitor) looks,
by CPU and stacks alone, exactly like a server waiting for work - a thread parked on a
condition variable, an event loop in epoll. Yet something specific will end the wait: the
peer reading, the worker's memory falling below its threshold. A pack names how the pause
shows (frames a thread waits in, or the log line the framework writes when it pauses) and
who can end it; ``diag.verdict.flow_control`` finds them in a capture and the wait-for graph
draws the edge to that party, so the verdict never reads "idle, healthy" by default.

Data only: names, file fragments, regular-expression *sources*; imports nothing of diag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Literal, Tuple

# Who can end the pause: the peer at the other end of the paused thread's connection (it must
# read), or the paused process's own memory (it must fall below the framework's threshold).
PauseParty = Literal["peer reader", "memory"]


@dataclass(frozen=True)
class FlowPause:
    """One way a framework pauses itself until a party ends it.

    Shown by a thread: a thread whose innermost ``depth`` frames hold a function of ``frames``
    in a file containing one of ``files`` (both required), with only frames of files in
    ``via`` above it (the wait primitive it parks in: no user code, which would be a wait
    of its own - a request generator blocked on its producer), in every sample. Or by a log line:
    ``pause_line`` (a regex source; named groups ``pct``, ``used``, ``limit`` where the line
    has them) with no later ``resume_line``; the paused process is the one of ``files`` whose
    resident memory is nearest the ``used`` the line reports.

    ``threshold`` names the setting that decides the pause, ``default_threshold_pct`` its
    default, ``remedy`` what a user does about it (one sentence)."""

    party: PauseParty
    what: str  # "gRPC's stream writer waits for its client to read (HTTP/2 flow control)"
    frames: FrozenSet[str] = frozenset()
    files: Tuple[str, ...] = ()
    via: Tuple[str, ...] = ("/threading.py",)
    depth: int = 8
    pause_line: str = ""
    resume_line: str = ""
    threshold: str = ""
    default_threshold_pct: float = 0.0
    remedy: str = ""
