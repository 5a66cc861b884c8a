"""A thread fed through the TCP socket it blocks reading: data keeps arriving on it.

Below ``features`` (it reads samples only), so the poll-loop reading there and the rules'
``tcp_ends`` share one definition. A main thread blocked in ``recv`` on a TCP connection whose
``tcpi_bytes_received`` grew over the capture, the last byte a moment ago, is being fed: a
download that trickles, or a subscriber consuming a feed. The same thread caught *running* in
that receive is no poll loop finding nothing (``polling``'s "a receive caught running returned
at once, with nothing"): tcp_info says it returned with data.

How the bytes come tells a transfer from a feed: a transfer (a file, a response body) arrives
in chunks as large as the path and the sender's writes allow, the reader woken once per
kilobytes; a feed's messages (ticks, events, lines) arrive as they occur, the reader woken for
each - a few hundred bytes a wake, dozens of wakes a second (``Fed.messages``).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from diag.model import FdEnd, ProcessSample, main_thread

# Data received this recently at the sample, at this rate over the capture: being fed. The
# rate keeps a feed's heartbeats (a few hundred bytes a second) out.
RECV_RECENT_S = 2.0
RECV_MIN_BYTES_PER_S = 2048.0
# A feed's messages: the reader woken this many times or more over the capture, for this many
# bytes a wake or fewer. A transfer's chunks are kilobytes a wake (a 2 KiB trickle every 0.5 s;
# a network-bound download, the socket buffer's worth).
FEED_MIN_WAKES = 20
FEED_MAX_BYTES_PER_WAKE = 1024.0


class Fed(NamedTuple):
    """A connection a process's main thread blocks reading while data keeps arriving on it."""

    end: FdEnd  # at the latest sample that shows the thread blocked on it
    got_bytes: int  # received on it over the capture (tcpi_bytes_received)
    window_s: float
    wakes: Optional[int] = None  # the reading thread's voluntary context switches meanwhile

    @property
    def messages(self) -> bool:
        """Message-sized arrivals, the reader woken for each: a feed, not a transfer."""
        return (
            self.wakes is not None
            and self.wakes >= FEED_MIN_WAKES
            and self.got_bytes <= FEED_MAX_BYTES_PER_WAKE * self.wakes
        )


def _blocked_end(ps: ProcessSample) -> Optional[FdEnd]:
    main = main_thread(ps)
    if main is None or main.syscall_fd is None or main.state == "R":
        return None
    return next((f for f in ps.fd_ends if f.fd == main.syscall_fd and f.kind == "tcp"), None)


def _switches(series: Sequence[ProcessSample]) -> Optional[int]:
    """The main thread's voluntary context switches from its first sample to its last."""
    counts = [
        t.voluntary_ctxt_switches
        for t in map(main_thread, series)
        if t is not None and t.voluntary_ctxt_switches is not None
    ]
    return counts[-1] - counts[0] if len(counts) >= 2 else None


def fed_socket(series: Sequence[ProcessSample], last_only: bool = False) -> Optional[Fed]:
    """The TCP connection the main thread blocks reading (at the last sample, or with
    ``last_only`` False the latest sample that shows it blocked) while data keeps arriving on
    it - tcp_info's bytes received grew at ``RECV_MIN_BYTES_PER_S`` or more from the first
    sample that saw it to the last, and the last data came within ``RECV_RECENT_S`` of that
    sample - or None. From the connection, not rchar: a socket's recv() is no read()."""
    ends = [_blocked_end(ps) for ps in series]
    if last_only:
        ends = ends[-1:]
    end = next((e for e in reversed(ends) if e is not None), None)
    if end is None or end.bytes_in is None or end.last_recv_s is None:
        return None
    if end.last_recv_s > RECV_RECENT_S:
        return None
    seen = [
        (ps.t_s, e.bytes_in)
        for ps in series
        for e in ps.fd_ends
        if e.inode == end.inode and e.bytes_in is not None
    ]
    if len(seen) < 2:
        return None
    (t0, a), (t1, b) = seen[0], seen[-1]
    window = t1 - t0
    got = (b or 0) - (a or 0)
    if window <= 0 or got / window < RECV_MIN_BYTES_PER_S:
        return None
    return Fed(end, got, window, _switches(series))


__all__ = ["FEED_MAX_BYTES_PER_WAKE", "RECV_MIN_BYTES_PER_S", "Fed", "fed_socket"]
