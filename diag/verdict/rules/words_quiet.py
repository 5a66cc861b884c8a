"""The rules' words for a subscriber waiting on a quiet peer outside the job (``quiet_peer``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from typing import Sequence

from diag.verdict.quiet_peer import QuietPeer
from diag.verdict.wording import where

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
