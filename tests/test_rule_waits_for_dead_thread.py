"""Rule ``waits_for_dead_thread`` (``diag.verdict.dead_setter.block_on_dead``): a thread parked
untimed on an Event, Condition or lock in the job's own code, one stack and no CPU at every
sample, while its log - one no other process writes - says a thread of its process died
("Exception in thread model-loader: ...") and no live thread has that name: it never ends,
where a listening port or a server's own loop made it read "idle, healthy, waiting for work".
Without the death line, with a live thread of that name, with work beside it, or with the
death in a log another process writes too (an idle service beside a helper's dead thread)
unless the waiter's process alone of the writers runs the job's files the traceback names,
it reads as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from recorded_variants import edit_log_lines, recorded_json
from recorded_variants import judge_variant as _judge

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def _raw(name: str) -> Json:
    return recorded_json(name)


def test_recorded_grpc_handler_waiting_for_a_dead_loader_is_deadlocked() -> None:
    v = classify(load_bundle(BUNDLES / "grpc_server_log_dead_loader.json"))
    assert (v.state, v.rule) == ("deadlocked", "waits_for_dead_thread"), v.summary
    assert "thread `model-loader` died" in v.summary and "OSError" in v.summary
    assert "serve.<locals>.predict" in v.summary
    data = _raw("grpc_server_log_dead_loader")
    assert data["target"]["root_pid"] not in [s.pid for s in v.suspects]  # the server is


def test_a_death_in_a_shared_log_is_not_the_waiters() -> None:
    """An idle service's main thread waits on its stop Event (its SIGTERM handler sets it)
    beside a helper child whose thread died in the log both write: idle, not 'kill it'. Both
    run the script the traceback names, so the death is nobody's. The price: writers of one
    script leave it nobody's (grpc_handler_dead_loader, lightning_ddp_dead_fetch read idle:
    VERDICT_WRONG_TODAY)."""
    v = classify(load_bundle(BUNDLES / "shared_log_stop_event.json"))
    assert v.state == "idle", v.summary


def test_without_the_death_line_it_reads_as_before(tmp_path: Path) -> None:
    data = _raw("grpc_server_log_dead_loader")
    edit_log_lines(data, lambda x: x.replace("Exception in thread", "Note from thread"))
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


def _share_server_log(data: Json, client_file: str = "") -> None:
    """The server's log written by the client too (``python client.py 2> job.log``, the
    server its child); ``client_file``: the client's own code moved to that file."""
    root = data["target"]["root_pid"]
    for sample in data["samples"]:
        for log in sample["logs"]:
            if log["path"].endswith("server.log"):
                log["pids"] = sorted({*log["pids"], root})
    if not client_file:
        return
    client_stacks = {
        t["stack_id"]
        for sample in data["samples"]
        for ps in sample["processes"]
        if ps["pid"] == root
        for t in ps["threads"]
        if t.get("stack_id")
    }
    for sid in client_stacks:
        for f in data["stacks"][sid]["frames"]:
            if f["filename"].endswith("grpc_handler_dead_loader.py"):
                f["filename"] = client_file


def test_a_shared_log_whose_traceback_only_the_waiter_runs_is_its_own(tmp_path: Path) -> None:
    """The client runs client.py, the server the file the dead thread's traceback names: the
    death is the server's, though both write the log - deadlocked."""
    data = _raw("grpc_server_log_dead_loader")
    _share_server_log(data, client_file="/srv/app/client.py")
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "waits_for_dead_thread"), v.summary
    assert data["target"]["root_pid"] not in [s.pid for s in v.suspects]


def test_a_shared_log_both_writers_run_the_traceback_of_is_nobodys(tmp_path: Path) -> None:
    """Client and server run the same script (the server re-executes it): the death may be
    either's - not this rule."""
    data = _raw("grpc_server_log_dead_loader")
    _share_server_log(data)
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary


def test_a_shared_log_with_a_writer_unread_is_nobodys(tmp_path: Path) -> None:
    """A writer whose stacks diag did not read may be the one that ran the traceback's file."""
    data = _raw("grpc_server_log_dead_loader")
    _share_server_log(data, client_file="/srv/app/client.py")
    root = data["target"]["root_pid"]
    for sample in data["samples"]:
        for ps in sample["processes"]:
            if ps["pid"] == root:
                for t in ps["threads"]:
                    t["stack_id"] = None
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary


def test_a_shared_log_whose_traceback_names_only_the_stdlib_is_nobodys(tmp_path: Path) -> None:
    data = _raw("grpc_server_log_dead_loader")
    _share_server_log(data, client_file="/srv/app/client.py")
    edit_log_lines(
        data, lambda x: x.replace("samples/scenarios/grpc_handler_dead_loader.py", "lib/x/queue.py")
    )
    v = _judge(data, tmp_path)
    assert v.rule != "waits_for_dead_thread", v.summary


def test_a_shared_log_held_by_no_python_process_too_is_still_the_waiters(tmp_path: Path) -> None:
    """An MPI daemon (``orted``) holds the log as well: no Python process, it wrote no CPython
    traceback - the death is still the server's alone."""
    data = _raw("grpc_server_log_dead_loader")
    _share_server_log(data, client_file="/srv/app/client.py")
    daemon = 424_242
    for sample in data["samples"]:
        for log in sample["logs"]:
            if log["path"].endswith("server.log"):
                log["pids"] = sorted({*log["pids"], daemon})
        host = sample["processes"][0].get("host", "")
        sample["processes"].append(
            {"pid": daemon, "host": host, "state": "S", "py_status": "not-python", "threads": []}
        )
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "waits_for_dead_thread"), v.summary
