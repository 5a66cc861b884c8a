"""A server answering short requests is working (``answers_requests`` through
``diag.verdict.short_requests``): a thread-per-request server that closes each connection
after a few ms of work leaves no open connection, no thread and no log line for a sample to
see - only the connections it closed, in TIME_WAIT on its port, younger than the gap since
the previous sample. A stream of such closes is progress; the same server with no client, a
lone health check, or closes older than the capture stay idle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant as _judge

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _busy() -> Json:
    data: Json = json.loads((BUNDLES / "threaded_server_short_requests.json").read_text())
    data.pop("verdict", None)
    return data


def _closed_entries(data: Json) -> list:  # type: ignore[type-arg]
    return [c for s in data["samples"] for p in s["processes"] for c in p.get("closed") or []]


def test_recorded_short_requests_are_progress_not_idle() -> None:
    v = classify(load_bundle(BUNDLES / "threaded_server_short_requests.json"))
    assert (v.state, v.rule) == ("progressing", "answers_requests"), v.summary
    assert "answers short requests on :" in v.summary and "TIME_WAIT" in v.summary
    assert "waiting for work" not in v.summary


def test_recorded_same_server_without_a_client_is_idle() -> None:
    v = classify(load_bundle(BUNDLES / "threaded_server_no_client.json"))
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary


def test_a_close_in_one_interval_only_is_a_probe_not_work(tmp_path: Path) -> None:
    """A health check every so often closes one connection in one interval: idle."""
    data = _busy()
    for sample in data["samples"][2:]:
        for p in sample["processes"]:
            for c in p.get("closed") or []:
                c["youngest_age_ms"] = 30_000
    v = _judge(data, tmp_path)
    assert v.state == "idle", v.summary


def test_closes_older_than_the_capture_are_history(tmp_path: Path) -> None:
    """TIME_WAITs left by an earlier burst (or a previous server on the port) age through the
    capture: nothing closed between its samples."""
    data = _busy()
    for n, c in enumerate(_closed_entries(data)):
        c["youngest_age_ms"] = 20_000 + 2_000 * n
        c["oldest_age_ms"] = 50_000
    v = _judge(data, tmp_path)
    assert v.state == "idle", v.summary


def test_a_trickle_below_one_close_every_two_seconds_is_no_stream(tmp_path: Path) -> None:
    data = _busy()
    for c in _closed_entries(data):
        c["count"], c["oldest_age_ms"] = 1, 59_000
    v = _judge(data, tmp_path)
    assert v.state == "idle", v.summary
