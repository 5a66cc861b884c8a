"""``requests_unanswered`` and a long poll (``diag.verdict.long_poll``): requests held open by
handler threads that all wait with a timeout the kernel reports ending within minutes are a
long poll - idle, answered when the event comes or the timeout fires - where it read
"deadlocked ... restart it (unless that endpoint is a long poll)". A handler waiting untimed,
or past any poll's length, is still a wedge; a long poll that answers is progress.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _variant(change: Callable[[Json], None], tmp_path: Path) -> Any:
    data: Json = json.loads((BUNDLES / "long_poll_waiting.json").read_text())
    data.pop("verdict", None)
    root = data["target"]["root_pid"]
    for sample in data["samples"]:
        for ps in sample["processes"]:
            if ps["pid"] == root:
                for t in ps["threads"]:
                    if t["tid"] != root and t.get("syscall") == "futex":
                        change(t)
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    return classify(load_bundle(path))


def test_recorded_long_poll_with_no_event_is_idle() -> None:
    v = classify(load_bundle(BUNDLES / "long_poll_waiting.json"))
    assert (v.state, v.rule) == ("idle", "requests_unanswered"), v.summary
    assert "a long poll" in v.summary and "wakes by itself in" in v.summary
    assert "Condition.wait_for" in v.summary and "restart" not in v.summary


def test_handlers_waiting_untimed_are_a_wedge(tmp_path: Path) -> None:
    def untimed(t: Json) -> None:
        t["wait_timed"], t["timeout_s"], t["wakes_in_s"] = False, None, None

    v = _variant(untimed, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "requests_unanswered"), v.summary


def test_a_wait_longer_than_any_poll_is_a_wedge(tmp_path: Path) -> None:
    def hour(t: Json) -> None:
        t["timeout_s"], t["wakes_in_s"] = 3600.0, 3500.0

    v = _variant(hour, tmp_path)
    assert v.state == "deadlocked", v.summary


def test_recorded_long_poll_that_answers_progresses() -> None:
    v = classify(load_bundle(BUNDLES / "long_poll_answering.json"))
    assert v.state == "progressing", v.summary


def test_recorded_request_cycle_stays_deadlocked() -> None:
    v = classify(load_bundle(BUNDLES / "http_request_cycle.json"))
    assert (v.state, v.rule) == ("deadlocked", "requests_unanswered"), v.summary
