"""The TCP connection a process's main thread blocks reading: one lookup, for the rules that
judge a wait on a reply (``quiet_peer``: a subscriber or a client owed a reply; ``work``: a
DataLoader worker's fetch). Below both, so neither imports the other's neighbours."""

from __future__ import annotations

from typing import NamedTuple, Optional

from diag.model import Bundle, FdEnd, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples


def blocked_tcp_end(bundle: Bundle, p: ProcSignals) -> Optional[FdEnd]:
    """The TCP end its main thread blocks reading at the last sample (with tcp_info's
    ``owed`` and last-data ages, where read)."""
    seen = process_samples(bundle, p.key[0], p.pid)
    last = seen[-1] if seen else None
    main = main_thread(last) if last is not None else None
    if last is None or main is None or main.syscall_fd is None:
        return None
    return next((f for f in last.fd_ends if f.fd == main.syscall_fd and f.kind == "tcp"), None)


# A reader blocked on a socket that received data this recently at the last sample, at this
# rate over the capture, is being fed: a slow transfer, not a wait. The rate keeps a feed's
# heartbeats (a few hundred bytes a second) out.
RECV_RECENT_S = 2.0
RECV_MIN_BYTES_PER_S = 2048.0


class Receiving(NamedTuple):
    """A connection a process blocks reading while data keeps arriving on it."""

    end: FdEnd  # at the last sample
    got_bytes: int  # received on it over the capture (tcpi_bytes_received)
    window_s: float


def receiving(bundle: Bundle, p: ProcSignals) -> Optional[Receiving]:
    """The TCP connection ``p``'s main thread blocks reading while data keeps arriving on it
    - tcp_info's bytes received grew at ``RECV_MIN_BYTES_PER_S`` or more from the first
    sample that saw it to the last, and the last data came within ``RECV_RECENT_S`` - a
    download that trickles (its thread is woken by each chunk, no timer), or None. From the
    connection, not the process's rchar: a socket's recv() is no read()."""
    end = blocked_tcp_end(bundle, p)
    if end is None or end.bytes_in is None or end.last_recv_s is None:
        return None
    if end.last_recv_s > RECV_RECENT_S:
        return None
    seen = [
        (ps.t_s, e.bytes_in)
        for ps in process_samples(bundle, p.key[0], p.pid)
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
    return Receiving(end, got, window)


__all__ = ["RECV_MIN_BYTES_PER_S", "Receiving", "blocked_tcp_end", "receiving"]
