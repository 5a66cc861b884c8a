"""``diag.verdict.dead_link.unanswered``: what tcp_info must say for a dead link - data in
flight (or a window probed) unacknowledged for 3 s, the timeout backed off twice - and what
is a slow or lossy link, or a quiet one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

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


# --- a rank in a collective: its backend's connections (gloo_link_cut) ----------------------

_CUT = Path(__file__).resolve().parents[1] / "samples" / "bundles" / "gloo_link_cut.json"


def _cut_data() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(_CUT.read_text())
    data.pop("verdict", None)
    return data


def test_recorded_link_cut_mid_training_is_a_collective_that_cannot_complete() -> None:
    """Two gloo ranks wait in all_reduce with the same stack; rank 0's pair connection to
    rank 1's host holds a chunk nothing acknowledges: deadlocked by the dead link, rank 0
    named - not 'a peer outside the capture, or a mismatched collective'."""
    from diag.bundle.io import load_bundle
    from diag.verdict.classify import classify

    v = classify(load_bundle(_CUT))
    assert (v.state, v.rule) == ("deadlocked", "peer_unreachable"), v.summary
    assert "rank 0 waits in `all_reduce`" in v.summary
    assert "its backend's connection fd " in v.summary and "can never complete" in v.summary
    assert [s.rank for s in v.suspects] == [0]


def test_a_collective_whose_connections_record_nothing_in_flight_has_no_dead_link(
    tmp_path: Path,
) -> None:
    """The same stacks with the link quiet (no delivery recorded): the peer rules judge."""
    from recorded_variants import judge_variant

    data = _cut_data()
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for end in ps.get("fd_ends") or []:
                end.pop("delivery", None)
    v = judge_variant(data, tmp_path)
    assert v.rule != "peer_unreachable", v.summary


def test_a_collective_connection_acknowledged_at_one_sample_is_no_dead_link(
    tmp_path: Path,
) -> None:
    """Acknowledged at the middle sample (nothing unacknowledged then): it moves, slowly."""
    from recorded_variants import judge_variant

    data = _cut_data()
    for ps in data["samples"][1]["processes"]:
        for end in ps.get("fd_ends") or []:
            if end.get("delivery"):
                end["delivery"]["unacked_segs"] = 0
    v = judge_variant(data, tmp_path)
    assert v.rule != "peer_unreachable", v.summary
