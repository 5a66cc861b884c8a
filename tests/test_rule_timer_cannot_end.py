"""Rule ``timer_cannot_end`` (``diag.verdict.futile_poll``): a thread that polls on a timer is no
door when its wakes cannot end the wait - a parent that polls ``proc.poll()`` with sleeps and
never reads the full pipe its child blocks on, a thread that holds a lock while it polls for
the threads that wait on it. It woke twice or more, the same stack each time, and did nothing
else. A single long sleep (a back-off), a poller that reads, or one whose stack moves stays a
door; the contrasts (a parent that drains the pipe, a lock released before polling) progress.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict

from recorded_variants import judge_variant as _judge

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _raw(name: str) -> Json:
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    data.pop("verdict", None)
    return data


def _edit_threads(data: Json, pid: int, change: Callable[[int, Json], None]) -> None:
    for n, sample in enumerate(data["samples"]):
        for ps in sample["processes"]:
            if ps["pid"] == pid:
                for t in ps["threads"]:
                    change(n, t)


def _root(data: Json) -> int:
    return int(data["target"]["root_pid"])


def test_recorded_parent_polling_instead_of_reading_is_deadlocked() -> None:
    data = _raw("child_pipe_polled")
    v = classify(load_bundle(BUNDLES / "child_pipe_polled.json"))
    assert (v.state, v.rule) == ("deadlocked", "timer_cannot_end"), v.summary
    assert "polls on a timer instead of reading it" in v.summary and "communicate()" in v.summary
    assert [s.pid for s in v.suspects] == [_root(data)]
    assert "waits_for_outside" in [m.rule for m in v.also_matched]


def test_recorded_lock_held_while_polling_is_deadlocked() -> None:
    data = _raw("lock_held_polling_uploads")
    v = classify(load_bundle(BUNDLES / "lock_held_polling_uploads.json"))
    assert (v.state, v.rule) == ("deadlocked", "timer_cannot_end"), v.summary
    assert "4 thread(s)" in v.summary and "cannot release the lock" in v.summary
    assert [s.pid for s in v.suspects] == [_root(data)]


def test_a_poller_that_did_not_wake_again_is_a_back_off(tmp_path: Path) -> None:
    """The same pictures with the sleeping thread's wakes flat: one long sleep - it ends by
    itself, still a door."""
    for name in ("child_pipe_polled", "lock_held_polling_uploads"):
        data = _raw(name)

        def flat(_: int, t: Json) -> None:
            if t.get("syscall") != "futex" and t.get("wchan") != "anon_pipe_write":
                t["voluntary_ctxt_switches"] = 5

        _edit_threads(data, _root(data), flat)
        v = _judge(data, tmp_path)
        assert v.rule != "timer_cannot_end", (name, v.summary)


def test_a_poller_whose_stack_moves_does_something(tmp_path: Path) -> None:
    data = _raw("lock_held_polling_uploads")
    root = _root(data)
    main = next(
        t
        for ps in data["samples"][0]["processes"]
        if ps["pid"] == root
        for t in ps["threads"]
        if t["tid"] == root
    )
    other = next(sid for sid in data["stacks"] if sid != main["stack_id"])

    def move(n: int, t: Json) -> None:
        if t["tid"] == root and n == 1:
            t["stack_id"] = other

    _edit_threads(data, root, move)
    v = _judge(data, tmp_path)
    assert v.rule != "timer_cannot_end", v.summary


def test_a_parent_that_read_is_no_futile_poller(tmp_path: Path) -> None:
    data = _raw("child_pipe_polled")
    root = _root(data)
    for n, sample in enumerate(data["samples"]):
        for ps in sample["processes"]:
            if ps["pid"] == root and ps.get("io"):
                ps["io"]["rchar"] += 65536 * n
    v = _judge(data, tmp_path)
    assert v.rule != "timer_cannot_end", v.summary


def test_recorded_contrasts_progress() -> None:
    for name in ("child_pipe_drained", "lock_released_polling_uploads"):
        v = classify(load_bundle(BUNDLES / f"{name}.json"))
        assert v.state == "progressing", (name, v.summary)


def test_threads_waiting_on_an_event_beside_a_poller_are_no_held_lock(tmp_path: Path) -> None:
    """A daemon's main thread waits untimed on a stop Event (a signal handler sets it), a
    heartbeat thread sleeps between beats: an Event is a door of its own, not a lock the
    poller holds."""
    data = _raw("lock_held_polling_uploads")
    threading_py = "/usr/lib/python3.11/threading.py"
    data["stacks"]["event-wait"] = {
        "frames": [
            {"name": "Condition.wait", "filename": threading_py, "line": 327},
            {"name": "Event.wait", "filename": threading_py, "line": 629},
            {"name": "serve_until_stopped", "filename": "/srv/agent.py", "line": 40},
        ]
    }
    root = _root(data)

    def to_event(_: int, t: Json) -> None:
        if t["tid"] != root:
            t["stack_id"] = "event-wait"

    _edit_threads(data, root, to_event)
    v = _judge(data, tmp_path)
    assert v.rule != "timer_cannot_end", v.summary
