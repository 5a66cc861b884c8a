"""``diag.verdict.dead_link.unanswered``: what tcp_info must say for a dead link - data in
flight (or a window probed) unacknowledged for 3 s, the timeout backed off twice - and what
is a slow or lossy link, or a quiet one."""

from __future__ import annotations

from diag.model import TcpDelivery
from diag.verdict.dead_link import unanswered


def test_in_flight_unacknowledged_and_backed_off_is_dead() -> None:
    assert unanswered(TcpDelivery(unacked_segs=1, rto_backoffs=5, ack_age_ms=12_000))
    assert unanswered(TcpDelivery(probes_out=3, rto_backoffs=3, ack_age_ms=9_000))


def test_a_lossy_or_just_sent_link_is_not() -> None:
    # one timeout: a lost segment being resent, acknowledged a moment ago
    assert not unanswered(TcpDelivery(unacked_segs=4, rto_backoffs=1, ack_age_ms=8_000))
    # backed off, but acknowledged within the last 3 s
    assert not unanswered(TcpDelivery(unacked_segs=1, rto_backoffs=3, ack_age_ms=900))
    assert not unanswered(None)  # a quiet link records nothing
