"""The rules' words for a subscriber waiting on a quiet peer outside the job (``quiet_peer``),
and for a wait on a peer whose kernel acknowledges nothing (``dead_link``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.dead_link import TCP_GIVES_UP_S, DeadLink
from diag.verdict.quiet_peer import QuietPeer
from diag.verdict.wait_age import age_words
from diag.verdict.wording import where, who

QUIET_PEER_OUTRANKS = (
    "a reader owed nothing by a live peer waits for what that peer sends next: the outside, "
    "not a deadlock"
)


def quiet_peer(found: Sequence[QuietPeer]) -> str:
    """``waits_on_quiet_peer``: who waits, on which connection, for whom."""
    q = found[0]
    more = f" (and {len(found) - 1} more like it)" if len(found) > 1 else ""
    return (
        f"pid {q.proc.pid} waits in {where(q.proc)} for data on fd {q.end.fd} (tcp "
        f"{q.end.local} → {q.end.remote}) from {q.peer.label}, which is alive "
        f"({q.peer.state}){more}. Nothing is owed to it - it sent no request that waits for "
        "an answer (it only received, or its last request was answered): a subscriber waiting "
        "for a push, healthy while its feed has nothing to send. If updates should be "
        f"flowing, look at pid {q.peer.pid} (`py-spy dump --pid {q.peer.pid}`, its log), not "
        "at this job"
    )


def quiet_peer_reason(q: QuietPeer) -> str:
    """The peer as a suspect: what would end the wait."""
    return f"alive outside the job; sends pid {q.proc.pid}'s next update on {q.end.remote}"


OWED_OUTRANKS = (
    "a reader owed a reply by one live process outside the job waits on that process: name "
    "it, and how long the request has waited, rather than a deadlock of nobody in particular"
)


def reply_owed(found: Sequence[QuietPeer], state: str) -> str:
    """``reply_owed``: who waits for a reply, on which connection, from whom, since when, and
    whether the one who owes it works on it."""
    q = found[0]
    more = f" (and {len(found) - 1} more like it)" if len(found) > 1 else ""
    age = q.end.last_sent_s
    since = f" for {age_words(age)}" if age is not None else ""
    cpu = f"{q.peer_cpu_pct:.0f} % of a core" if q.peer_cpu_pct is not None else "CPU not read"
    if state == "slow":
        tail = (
            f"it works ({cpu}): it is computing the reply - wait, or look at pid {q.peer.pid} "
            f"(`py-spy dump --pid {q.peer.pid}`) if it takes longer than it should"
        )
    else:
        tail = (
            f"it is {q.peer.state} and does no work ({cpu}): nothing in this job can end "
            f"the wait, only pid {q.peer.pid} can - look at it (`py-spy dump --pid "
            f"{q.peer.pid}`, its log); restarting this job would wait on it again"
        )
    return (
        f"pid {q.proc.pid} waits in {where(q.proc)} for a reply on fd {q.end.fd} "
        f"(tcp {q.end.local} → {q.end.remote}) from {q.peer.label}, which owes it one{since} "
        f"(this side sent a request after the last data it got){more}; {tail}"
    )


def reply_owed_reason(q: QuietPeer) -> str:
    """The peer as a suspect: it owes the job a reply."""
    age = q.end.last_sent_s
    since = f" for {age_words(age)}" if age is not None else ""
    return f"alive outside the job; owes pid {q.proc.pid} a reply on {q.end.remote}{since}"


DEAD_LINK_OUTRANKS = (
    "a connection whose other end acknowledges nothing will carry no answer, whoever holds "
    "that end and whatever the job's other waits are: the peer's host or the link is dead"
)


def dead_link(found: Sequence[DeadLink]) -> str:
    """``peer_unreachable``: who waits, on which connection, and what the kernel says of it."""
    d = found[0]
    got = d.end.delivery
    assert got is not None  # dead_link found it so
    more = f" (and {len(found) - 1} more like it)" if len(found) > 1 else ""
    if got.unacked_segs:
        what = (
            f"{got.unacked_segs} segment(s) it sent have gone unacknowledged for "
            f"{age_words(got.ack_age_ms / 1000.0)}, the retransmission timeout backed off "
            f"{got.rto_backoffs} times ({got.retrans_total} retransmissions"
            + (f", {d.retrans_delta} during the capture)" if d.retrans_delta else ")")
        )
    else:
        what = (
            f"its zero-window probes went unanswered {got.probes_out} times in a row, nothing "
            f"acknowledged for {age_words(got.ack_age_ms / 1000.0)}"
        )
    if d.collective:
        return (
            f"{who([d.proc])} waits in {where(d.proc)}, and its backend's connection fd "
            f"{d.end.fd} (tcp {d.end.local} → {d.end.remote}) to a peer of the collective is "
            f"dead: {d.end.remote}'s kernel acknowledges nothing - {what}{more}. That peer's "
            "host is down or the link to it is cut (a pulled cable, a dead switch port, a "
            "firewall dropping): the collective can never complete, however alike the ranks' "
            f"stacks look. Check that host and the route to it (`ping`, `ss -ti dst "
            f"{d.end.remote}`); restart the job once the link is back, or without that host"
        )
    return (
        f"pid {d.proc.pid} waits in {where(d.proc)} on fd {d.end.fd} (tcp "
        f"{d.end.local} → {d.end.remote}), and {d.end.remote}'s kernel acknowledges nothing: "
        f"{what}{more}. Its host is down or the link to it is cut (a firewall dropping, a "
        "network partition) - the answer will never come; TCP itself gives up only after "
        f"~{int(TCP_GIVES_UP_S // 60)} min. Check that host and the route to it "
        f"(`ping`, `ss -ti dst {d.end.remote}`); restart the job against a live peer, or give "
        "the call a timeout"
    )


def dead_link_reason(d: DeadLink) -> str:
    """The waiting process as a suspect: which peer it waits on, and that it is gone."""
    return f"waits on {d.end.remote}, whose kernel acknowledges nothing (host down or link cut)"
