"""The TCP connection a process's main thread blocks reading: one lookup, for the rules that
judge a wait on a reply (``quiet_peer``: a subscriber or a client owed a reply; ``work``: a
DataLoader worker's fetch). Below both, so neither imports the other's neighbours."""

from __future__ import annotations

from typing import Optional

from diag.model import Bundle, FdEnd, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.fed_socket import RECV_MIN_BYTES_PER_S, Fed, fed_socket
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


Receiving = Fed  # a connection a process blocks reading while data keeps arriving on it


def receiving(bundle: Bundle, p: ProcSignals) -> Optional[Receiving]:
    """The TCP connection ``p``'s main thread blocks reading at the last sample while data
    keeps arriving on it (``fed_socket``): a download that trickles, a feed consumed - or
    None."""
    return fed_socket(process_samples(bundle, p.key[0], p.pid), last_only=True)


__all__ = ["RECV_MIN_BYTES_PER_S", "Receiving", "blocked_tcp_end", "receiving"]
