"""A server answering short requests, seen across samples by the connections it closed.

A thread-per-request server (``ThreadingHTTPServer``, a sync worker) that answers in a few
milliseconds and closes each connection leaves nothing for a sample to catch: no open client
connection (so no bytes on ``ServedConn``), no handler thread, no log line when its access log
is off, its listener thread back in ``select``. Each connection it closed stays in TIME_WAIT
on its listening port for 60 s (``ProcessSample.closed``; a client that gave up on a stuck
server closes first and leaves it on its own side, not here). A close younger than the gap
since the previous sample happened between the two - a request came, was answered and went.

One close now and then is a health check or a stray probe on an idle server; a stream of them
is work. So the server answers short requests when a close fell in most intervals of the
capture (two at least) at a rate of one every 2 s or more over what the kernel remembers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from diag.model import ProcessSample

MIN_INTERVALS = 2  # a stream, not a probe
MIN_RATE_PER_S = 0.5
TIME_WAIT_S = 60.0  # Linux's TCP_TIMEWAIT_LEN


@dataclass(frozen=True)
class ShortRequests:
    """Connections to ``port`` accepted and closed across the capture: ``closed`` in the
    last ``span_s`` seconds at the last sample, and in how many of ``intervals`` a close fell."""

    port: int
    closed: int
    span_s: float
    with_close: int
    intervals: int

    @property
    def rate_per_s(self) -> float:
        return self.closed / max(1.0, self.span_s)


def short_requests(alive: Sequence[Tuple[float, ProcessSample]]) -> Optional[ShortRequests]:
    """The port of a process whose connections closed between samples, in most intervals and
    at a steady rate (see the module docstring); None otherwise."""
    if len(alive) < MIN_INTERVALS + 1:
        return None
    intervals = len(alive) - 1
    best: Optional[ShortRequests] = None
    ports = {c.port for _, ps in alive for c in ps.closed}
    for port in sorted(ports):
        with_close = 0
        for (t0, _), (t1, ps) in zip(alive, alive[1:]):
            gap_ms = (t1 - t0) * 1000.0
            if any(c.port == port and c.count and c.youngest_age_ms < gap_ms for c in ps.closed):
                with_close += 1
        last = next((c for c in alive[-1][1].closed if c.port == port), None)
        if last is None or with_close < max(MIN_INTERVALS, (intervals + 1) // 2):
            continue
        span_s = min(TIME_WAIT_S, max(last.oldest_age_ms / 1000.0, alive[-1][0] - alive[0][0]))
        found = ShortRequests(port, last.count, span_s, with_close, intervals)
        if found.rate_per_s >= MIN_RATE_PER_S and (best is None or found.closed > best.closed):
            best = found
    return best
