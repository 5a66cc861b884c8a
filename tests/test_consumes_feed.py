"""A feed consumed message by message is progress, not a slow transfer (``consumes_feed``,
``diag.verdict.fed_socket``): a subscriber blocks in ``recv`` between a publisher's ticks,
woken for each - dozens of wakes a second, a few dozen bytes a wake - where a download's
chunks are kilobytes a wake. Recorded from samples/scenarios/subscriber_busy_feed.py (and its
CSV-writing variant); the contrasts are edits of them and download_trickles."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant, recorded_json

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _mains(data: Json) -> list:  # type: ignore[type-arg]
    return [
        t
        for sample in data["samples"]
        for ps in sample["processes"]
        for t in ps["threads"]
        if t["tid"] == ps["pid"]
    ]


def test_the_recorded_consumer_of_a_busy_feed_is_progressing() -> None:
    v = classify(load_bundle(BUNDLES / "subscriber_busy_feed.json"))
    assert (v.state, v.rule) == ("progressing", "consumes_feed"), v.summary
    assert "consumes a feed from 127.0.0.1:" in v.summary
    assert "slow transfer" not in v.summary


def test_the_same_bytes_in_few_wakes_are_a_transfer(tmp_path: Path) -> None:
    """The same bytes arriving in kilobyte chunks (the reader woken a few times): a download
    that trickles - slow, as before."""
    data = recorded_json("subscriber_busy_feed")
    for i, t in enumerate(_mains(data)):
        t["voluntary_ctxt_switches"] = 100 + 4 * i
    v = judge_variant(data, tmp_path)
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary


def test_a_download_that_trickles_stays_a_slow_transfer() -> None:
    v = classify(load_bundle(BUNDLES / "download_trickles.json"))
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary


def test_a_consumer_caught_running_in_its_receive_is_fed_not_polling(tmp_path: Path) -> None:
    """The CSV-writing consumer with its main thread caught running in the receive at the
    middle sample: read alone, a receive that returned at once with nothing (a poll loop, its
    writes the loop's chatter); tcp_info says data keeps arriving - it returned with data."""
    data = recorded_json("subscriber_busy_feed_csv")
    middle = _mains(data)[1]
    middle.update(state="R", syscall="running", syscall_fd=None, wait_timed=None)
    v = judge_variant(data, tmp_path)
    assert (v.state, v.rule) == ("progressing", "output_moves"), v.summary
