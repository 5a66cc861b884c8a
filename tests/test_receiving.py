"""A download that trickles is a slow transfer, not a wait (``diag.verdict.tcp_ends``): the
downloader blocks in ``recv`` with no CPU while a store outside the job sends 4 KiB/s. A
socket's recv() is no read() - the process's rchar never shows it - so the evidence is the
connection's own: tcp_info's bytes received growing across samples, the last byte a moment
ago. Recorded from samples/scenarios/download_trickles.py; the contrasts are edits of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLE = Path(__file__).resolve().parents[1] / "samples" / "bundles" / "download_trickles.json"
Json = Dict[str, Any]


def _data() -> Json:
    data: Json = json.loads(BUNDLE.read_text())
    data.pop("verdict", None)
    return data


def _tcp_ends(data: Json) -> list:  # type: ignore[type-arg]
    return [
        end
        for sample in data["samples"]
        for ps in sample["processes"]
        for end in ps.get("fd_ends") or []
        if end.get("kind") == "tcp" and end.get("bytes_in") is not None
    ]


def test_recorded_trickle_is_a_slow_transfer_naming_the_peer() -> None:
    v = classify(load_bundle(BUNDLE))
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary
    assert "receives 4.0 KiB/s from 127.0.0.1:" in v.summary
    assert "a slow transfer, network-bound, not a wait" in v.summary


def test_bytes_that_stopped_arriving_are_no_transfer(tmp_path: Path) -> None:
    """The same connection with its byte count frozen: the peer sends nothing any more."""
    data = _data()
    for end in _tcp_ends(data):
        end["bytes_in"] = 4096
    v = judge_variant(data, tmp_path)
    assert v.state != "slow" and "receives" not in v.summary, v.summary


def test_a_last_byte_long_ago_is_no_transfer(tmp_path: Path) -> None:
    """Bytes grew early, but nothing came for a minute at the last sample: not being fed."""
    data = _data()
    for end in _tcp_ends(data):
        end["last_recv_s"] = 60.0
    v = judge_variant(data, tmp_path)
    assert "receives" not in v.summary, v.summary


def test_a_heartbeat_rate_is_no_transfer(tmp_path: Path) -> None:
    """A few hundred bytes a second (a feed's heartbeats) is under the rate of a transfer."""
    data = _data()
    ends = _tcp_ends(data)
    first = ends[0]["bytes_in"]
    for i, end in enumerate(ends):
        end["bytes_in"] = first + 300 * i
    v = judge_variant(data, tmp_path)
    assert "receives" not in v.summary, v.summary
