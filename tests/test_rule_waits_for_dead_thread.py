"""Rule ``waits_for_dead_thread`` (``diag.verdict.dead_setter.block_on_dead``): a thread parked
untimed on an Event, Condition or lock in the job's own code, one stack and no CPU at every
sample, while its log - one no other process writes - says a thread of its process died
("Exception in thread model-loader: ...") and no live thread has that name: it never ends,
where a listening port or a server's own loop made it read "idle, healthy, waiting for work".
Without the death line, with a live thread of that name, with work beside it, or with the
death in a log another process writes too (an idle service beside a helper's dead thread),
it reads as before.
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


def _raw(name: str) -> Json:
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    data.pop("verdict", None)
    return data


def _edit_log_lines(data: Json, change: Any) -> None:
    for sample in data["samples"]:
        for log in sample["logs"]:
            for part in ("tail", "head"):
                if part in log:
                    log[part] = [change(x) for x in log[part]]


def test_recorded_grpc_handler_waiting_for_a_dead_loader_is_deadlocked() -> None:
    v = classify(load_bundle(BUNDLES / "grpc_server_log_dead_loader.json"))
    assert (v.state, v.rule) == ("deadlocked", "waits_for_dead_thread"), v.summary
    assert "thread `model-loader` died" in v.summary and "OSError" in v.summary
    assert "serve.<locals>.predict" in v.summary
    data = _raw("grpc_server_log_dead_loader")
    assert data["target"]["root_pid"] not in [s.pid for s in v.suspects]  # the server is


def test_a_death_in_a_shared_log_is_not_the_waiters() -> None:
    """An idle service's main thread waits on its stop Event (its SIGTERM handler sets it)
    beside a helper child whose thread died in the log both write: idle, not 'kill it'. The
    price: a death in a shared log is nobody's (grpc_handler_dead_loader,
    lightning_ddp_dead_fetch read idle: VERDICT_WRONG_TODAY)."""
    v = classify(load_bundle(BUNDLES / "shared_log_stop_event.json"))
    assert v.state == "idle", v.summary


def test_without_the_death_line_it_reads_as_before(tmp_path: Path) -> None:
    data = _raw("grpc_server_log_dead_loader")
    _edit_log_lines(data, lambda x: x.replace("Exception in thread", "Note from thread"))
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary


def test_a_thread_of_that_name_still_alive_is_no_dead_setter(tmp_path: Path) -> None:
    """The log's thread name is a live thread's (a thread restarted under the same name)."""
    data = _raw("grpc_server_log_dead_loader")
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for t in ps["threads"]:
                if t.get("py_thread_name") == "Thread-1 (_serve)":
                    t["py_thread_name"] = "model-loader"
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary


def test_a_rank_computing_beside_it_is_slow() -> None:
    """The contrast: rank 1 computes in its step, no thread died - slow, wait."""
    v = classify(load_bundle(BUNDLES / "lightning_ddp_slow_rank.json"))
    assert v.state == "slow", v.summary


def test_a_thread_computing_beside_it_may_set_it(tmp_path: Path) -> None:
    """Another thread of the server burns a core in every interval (live work that may be the
    one to set the Event): not this rule - the waiter may be waiting on that work."""
    data = _raw("grpc_server_log_dead_loader")
    root = data["target"]["root_pid"]
    for i, sample in enumerate(data["samples"]):
        for ps in sample["processes"]:
            if ps["pid"] != root:
                busy = next(t for t in ps["threads"] if t.get("name") == "grpc_global_tim")
                busy["utime_ticks"] = busy.get("utime_ticks", 0) + 180 * i
                busy["state"] = "R"
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary
