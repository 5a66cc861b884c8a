"""Rule ``spins_for_dead_thread`` (``diag.verdict.dead_setter``): a pure-Python busy-wait
(``while not loader.ready: pass``) on one line at every sample, busy all along, while the log
says the thread that was to set the flag died ("Exception in thread prefetch: ...") - it never
ends, where it read "slow: CPU-bound ... wait, don't kill". Without the death line it is work
as before; a spin whose setter is alive ends during the capture (progress).
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


def _raw() -> Json:
    return recorded_json("spin_on_dead_loader")


def test_recorded_spin_on_a_dead_setter_is_deadlocked() -> None:
    data = _raw()
    v = classify(load_bundle(BUNDLES / "spin_on_dead_loader.json"))
    assert (v.state, v.rule) == ("deadlocked", "spins_for_dead_thread"), v.summary
    assert "thread `prefetch` died" in v.summary and "FileNotFoundError" in v.summary
    assert "wait_until_ready" in v.summary and "don't kill" not in v.summary
    assert [s.pid for s in v.suspects] == [data["target"]["root_pid"]]
    assert "works_silently" in [m.rule for m in v.also_matched]


def test_without_the_death_line_the_spin_is_work(tmp_path: Path) -> None:
    data = _raw()
    edit_log_lines(data, lambda x: x.replace("Exception in thread", "Note from thread"))
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary


def test_a_thread_of_that_name_still_alive_is_no_dead_setter(tmp_path: Path) -> None:
    """The log's thread name is a live thread's (a thread restarted under the same name)."""
    data = _raw()
    root = data["target"]["root_pid"]
    for sample in data["samples"]:
        for ps in sample["processes"]:
            if ps["pid"] == root:
                ps["threads"][0]["py_thread_name"] = "prefetch"
    v = _judge(data, tmp_path)
    assert v.rule != "spins_for_dead_thread", v.summary


def test_recorded_spin_whose_setter_lives_ends() -> None:
    v = classify(load_bundle(BUNDLES / "spin_until_loaded.json"))
    assert v.state == "progressing", v.summary


def test_a_death_line_in_a_log_another_process_writes_is_not_its_own(tmp_path: Path) -> None:
    """The log is shared (``2> job.log`` inherited by a child): CPython's death line names no
    process, and a writer whose stacks diag did not read may run the traceback's files, so
    the busy process's spin is not read as waiting on that thread (``death_owner``)."""
    data = _raw()
    for sample in data["samples"]:
        for log in sample["logs"]:
            log["pids"] = [*log["pids"], 999_999]
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary
