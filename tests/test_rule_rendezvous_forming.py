"""Rule ``rendezvous_forming``: every rank waits in ``init_process_group`` with no CPU and no
log line - but rank 0 (the store's host) arrived there during the capture from its own slow
start. Recorded from ``store_host_late`` on a host loaded enough that the capture ended while
the ranks met (a CI run read it "deadlocked: rank 1 diverged, kill the job"): the start-up
advances. The contrasts: the same stacks with rank 0 in the rendezvous from the first sample
(no one arrived: the peer rules judge), and one rank still outside at the last sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLE = Path(__file__).resolve().parents[1] / "samples" / "bundles" / "store_host_arrives.json"
Json = Dict[str, Any]


def _data() -> Json:
    data: Json = json.loads(BUNDLE.read_text())
    data.pop("verdict", None)
    return data


def _main_thread(data: Json, sample: int, pid: int) -> Json:
    proc = next(p for p in data["samples"][sample]["processes"] if p["pid"] == pid)
    thread: Json = next(t for t in proc["threads"] if t["tid"] == pid)
    return thread


def _rank_pid(data: Json, rank: int) -> int:
    return next(int(p["pid"]) for p in data["processes"] if p.get("rank") == rank)


def test_recorded_late_store_host_arriving_is_a_start_up_that_advances() -> None:
    v = classify(load_bundle(BUNDLE))
    assert (v.state, v.rule) == ("progressing", "rendezvous_forming"), v.summary
    assert "rank 0 reached `init_process_group` during the capture" in v.summary
    assert "`rank_main` at the first sample" in v.summary
    assert "peers_wait" in [m.rule for m in v.also_matched]


def test_no_arrival_when_every_rank_waited_there_from_the_first_sample(tmp_path: Path) -> None:
    data = _data()
    pid = _rank_pid(data, 0)
    last = _main_thread(data, -1, pid)["stack_id"]
    for i in range(len(data["samples"])):
        _main_thread(data, i, pid)["stack_id"] = last
    v = judge_variant(data, tmp_path)
    assert v.rule != "rendezvous_forming" and v.state != "progressing", v.summary


def test_no_arrival_while_a_rank_is_still_outside_the_rendezvous(tmp_path: Path) -> None:
    data = _data()
    rank0, rank1 = _rank_pid(data, 0), _rank_pid(data, 1)
    outside = _main_thread(data, 0, rank0)["stack_id"]  # rank 0's own slow start
    _main_thread(data, -1, rank1)["stack_id"] = outside
    v = judge_variant(data, tmp_path)
    assert v.rule != "rendezvous_forming", v.summary


def test_a_world_larger_than_the_ranks_here_says_the_others_must_come(tmp_path: Path) -> None:
    """WORLD_SIZE 4 with three ranks captured (the fourth on another host, or not started):
    the arrival is still the start-up advancing, but the sentence does not promise a meeting
    of ranks that are all present - it says how many are here and what to look for."""
    data = _data()
    for p in data["processes"]:
        if p.get("world_size"):
            p["world_size"] = 4
    v = judge_variant(data, tmp_path)
    assert v.rule == "rendezvous_forming", v.summary
    assert "3 of its 4 ranks are here - the others must come too" in v.summary
    assert "all present" not in v.summary
