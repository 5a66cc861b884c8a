"""A wait on a connection whose other end's kernel no longer acknowledges: the peer's host is
down or the link to it is cut, and what the job waits for will never come (issue #33).

Blocked in ``recv`` for an answer, a client of a dead host reads the same as a client of a
slow one, or of a feed with nothing to say; its stacks cannot tell. The kernel can: while a
host is up its TCP acknowledges every segment, whatever its process does (a stopped or busy
server still has its data acknowledged, then its full window probed and answered). A dead host
acknowledges nothing: the request's segments stay unacknowledged (``tcpi_unacked``), each
retransmission timeout doubles the next (``tcpi_backoff``), retransmissions add up
(``tcpi_total_retrans``) and no acknowledgement arrives (``tcpi_last_ack_recv``); a zero
window probed without answer (``tcpi_probes``) says the same of a peer that had stopped
reading. TCP itself gives up only after ~15 min (``tcp_retries2`` = 15), and a call without a
timeout waits that long or for ever.

A rank waiting in a collective blocks on no socket of its own: the backend's threads move the
data (gloo's pairs in its epoll loop, NCCL's proxy). For it every TCP connection of the process
is read: a collective completes only when every pair delivers, so one connection whose other
end acknowledges nothing is a collective that can never complete - two ranks in ``all_reduce``
with the same stack, no CPU, no line, otherwise read as a mismatched collective or a slow peer.

A quiet link - nothing in flight, nothing probed - records no ``TcpDelivery`` and is never
read as dead: a subscriber on a quiet feed, a request its peer acknowledged and has not yet
answered, stay with the rules that judge them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from diag.model import Bundle, FdEnd, ProcessSample, TcpDelivery
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.waits import PEER

# Unacknowledged this long with the timeout backed off this often: not a slow or lossy link
# (which acknowledges within an RTO or two) but nothing answering. The RTO starts at 200 ms -
# 1 s, so two back-offs are ~1-3 s of silence; 3 s without any acknowledgement is past both.
DEAD_ACK_S = 3.0
MIN_BACKOFFS = 2
TCP_GIVES_UP_S = 924.6  # Linux's default tcp_retries2 (15) at the minimum RTO: ~15.4 min


@dataclass(frozen=True)
class DeadLink:
    """A connection a process waits on whose other end acknowledges nothing."""

    proc: ProcSignals
    end: FdEnd  # at the last sample, with its ``delivery``
    retrans_delta: int  # segments retransmitted during the capture
    samples: int  # samples that saw it in flight
    # Found among the connections of a rank waiting in a collective (its backend's), not on a
    # socket the process itself blocks on.
    collective: bool = False


def unanswered(d: Optional[TcpDelivery]) -> bool:
    """Data in flight or a window probed, without any acknowledgement for ``DEAD_ACK_S``,
    the retransmission timeout backed off ``MIN_BACKOFFS`` times or more."""
    if d is None or d.ack_age_ms < DEAD_ACK_S * 1000:
        return False
    in_flight = d.unacked_segs > 0 and d.rto_backoffs >= MIN_BACKOFFS
    return in_flight or d.probes_out >= MIN_BACKOFFS


def _series(bundle: Bundle, p: ProcSignals) -> List[ProcessSample]:
    host, pid = p.key  # found by key: a scan of every sample per rank was ranks x ranks
    return [ps for ps in process_samples(bundle, host, pid) if ps.status == "alive"]


def _blocked_fds(ps: ProcessSample) -> List[int]:
    """The fds its threads block on at this sample (the main thread's first)."""
    fds = [t.syscall_fd for t in sorted(ps.threads, key=lambda t: t.tid != ps.pid)]
    return [fd for fd in fds if fd is not None]


def dead_link(bundle: Bundle, p: ProcSignals) -> Optional[DeadLink]:
    """The connection ``p`` blocks on whose other end acknowledged nothing in any sample of
    the capture, two samples at least; None otherwise."""
    series = _series(bundle, p)
    if len(series) < 2:
        return None
    last = series[-1]
    if not any(e.kind == "tcp" and unanswered(e.delivery) for e in last.fd_ends):
        return None  # no end to blame: the fds its 300 threads block on need no sort
    blocked = _blocked_fds(last)
    collective = p.main_family == PEER
    if collective:  # every connection of its backend: blocked fds first
        blocked += [e.fd for e in last.fd_ends if e.kind == "tcp" and e.fd not in blocked]
    for fd in blocked:
        end = next((e for e in last.fd_ends if e.fd == fd and e.kind == "tcp"), None)
        if end is None or not unanswered(end.delivery):
            continue
        seen = [
            e.delivery
            for ps in series
            for e in ps.fd_ends
            if e.inode == end.inode and e.delivery is not None
        ]
        if len(seen) < len(series) or not all(d.unacked_segs or d.probes_out for d in seen):
            continue  # acknowledged at some sample: it moves, slowly
        moved = seen[-1].retrans_total - seen[0].retrans_total
        return DeadLink(p, end, moved, len(seen), collective and fd not in _blocked_fds(last))
    return None


def dead_links(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[DeadLink]:
    """Each process's dead link, for those that have one."""
    found = (dead_link(bundle, p) for p in procs)
    return [d for d in found if d is not None]
