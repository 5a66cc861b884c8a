"""Rule ``store_host_died`` (death outranks a door): ranks waiting to join a c10d store whose
host, rank 0, is dead read deadlocked with rank 0 named and the evidence quoted - its
traceback in the followed log, a line with its exit status, or on one host its launcher having
reaped it - never "idle: the master is late". With none of that, a host that is only missing
stays idle and the verdict says which evidence would tell; a host that is late and comes up
during the capture is progress.
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


def _crashed() -> Json:
    data: Json = json.loads((BUNDLES / "store_host_crashed.json").read_text())
    data.pop("verdict", None)
    return data


def _set_log_tail(data: Json, tail: list) -> None:  # type: ignore[type-arg]
    for sample in data["samples"]:
        for log in sample["logs"]:
            log["tail"], log["head"] = list(tail), list(tail)


def _no_reaped_children(data: Json) -> None:
    for sample in data["samples"]:
        for ps in sample["processes"]:
            ps["children_ticks"] = 0


def test_recorded_host_crash_is_deadlocked_naming_rank_0() -> None:
    v = classify(load_bundle(BUNDLES / "store_host_crashed.json"))
    assert (v.state, v.rule) == ("deadlocked", "store_host_died"), v.summary
    assert "whose host, rank 0, is dead" in v.summary
    assert "FileNotFoundError" in v.summary and "has reaped a child" in v.summary
    assert [s.rank for s in v.suspects] == [0]
    assert "waits_for_nodes_to_join" in [m.rule for m in v.also_matched]


def test_the_launcher_having_reaped_it_is_enough_on_one_host(tmp_path: Path) -> None:
    """No traceback in any log: rank 0 belongs here (loopback), its launcher reaped a child
    that ran, no child is rank 0 - it died."""
    data = _crashed()
    _set_log_tail(data, ["loading data"])
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "store_host_died"), v.summary
    assert "has reaped a child" in v.summary and "traceback" not in v.summary


def test_an_exit_status_line_is_enough(tmp_path: Path) -> None:
    data = _crashed()
    _set_log_tail(data, ["launcher: rank 0 (pid 4242) exited with code 1"])
    _no_reaped_children(data)
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("deadlocked", "store_host_died"), v.summary
    assert "exited with code 1" in v.summary


def test_an_exit_0_or_another_ranks_traceback_is_no_death_of_the_host(tmp_path: Path) -> None:
    data = _crashed()
    _set_log_tail(
        data,
        [
            "launcher: rank 0 exited with code 0",
            "[rank3]: Traceback (most recent call last):",
            "[rank3]: ValueError: bad shard",
        ],
    )
    _no_reaped_children(data)
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("idle", "waits_for_nodes_to_join"), v.summary


def test_missing_without_a_trace_stays_idle_and_says_what_would_tell(tmp_path: Path) -> None:
    """Late and silently dead look alike within one capture: idle, and the sentence names the
    evidence that would tell them apart and that ``diag watch`` sees a late one come up."""
    data = _crashed()
    _set_log_tail(data, ["loading data"])
    _no_reaped_children(data)
    v = _judge(data, tmp_path)
    assert (v.state, v.rule) == ("idle", "waits_for_nodes_to_join"), v.summary
    assert "Rank 0 belongs on this host" in v.summary
    assert "launcher's exit status tells which" in v.summary and "diag watch" in v.summary


def test_recorded_late_host_that_comes_up_is_progress() -> None:
    v = classify(load_bundle(BUNDLES / "store_host_late.json"))
    assert v.state == "progressing", v.summary
    assert "store_host_died" not in [m.rule for m in v.also_matched]
