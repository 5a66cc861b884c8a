"""Rule ``spins_with_no_party`` (#31, ``diag.probes.spin_code``, ``native_waits``): a C
busy-poll (``while (*flag != expect) pause;`` through ctypes, the GIL released, no syscall)
on a shared-memory flag whose writer crashed and was reaped spins for ever - the PAUSE in a
loop of a few bytes says it waits, whatever library it is in, and nothing else in the job runs
that could end it: deadlocked, where it read "slow: CPU-bound ... wait, don't kill". Its live
contrast (the writer computes for minutes before it posts) stays slow, the spinner named as a
busy-wait. Without the code read (an older capture, perf refused) the rule is silent; a rank
of a multi-rank job, or a process of the job that computes, is the peer rows'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from recorded_variants import judge_variant, recorded_json

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]
RULE = "spins_with_no_party"


def _threads(data: Json) -> Any:
    for sample in data["samples"]:
        for ps in sample["processes"]:
            yield ps, ps["threads"]


def test_recorded_pause_spin_with_its_writer_gone_is_deadlocked() -> None:
    data = recorded_json("native_spin_dead_peer")
    v = classify(load_bundle(BUNDLES / "native_spin_dead_peer.json"))
    assert (v.state, v.rule) == ("deadlocked", RULE), v.summary
    assert "PAUSE loop at libspin.so:`wait_flag`" in v.summary
    assert "nothing in the job runs that could end it" in v.summary
    assert "don't kill" not in v.summary
    assert [s.pid for s in v.suspects] == [data["target"]["root_pid"]]
    spin = [e.detail for e in v.evidence if e.signal == "spin"]
    assert spin and "PAUSE loop at libspin.so:`wait_flag` for 4 s" in spin[0], spin


def test_recorded_pause_spin_beside_a_computing_writer_is_slow() -> None:
    v = classify(load_bundle(BUNDLES / "native_spin_live_peer.json"))
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary
    assert "CPU-bound in `peer`" in v.summary and "PAUSE loop" in v.summary
    assert RULE not in [m.rule for m in v.also_matched]
    root = load_bundle(BUNDLES / "native_spin_live_peer.json").target.root_pid
    assert [s.pid for s in v.suspects] != [root]  # the writer computing is the one to wait for
    assert all("CPU-bound in `peer`" in s.reason for s in v.suspects), v.suspects


def test_without_the_code_read_the_spin_is_not_told_as_one(tmp_path: Path) -> None:
    """An older capture, or one whose code read failed: a spin on an unknown symbol stays
    the peer rows' (or work), never this rule's."""
    data = recorded_json("native_spin_dead_peer")
    for _, threads in _threads(data):
        for t in threads:
            if t.get("native"):
                t["native"].pop("spin_hint", None)
    v = judge_variant(data, tmp_path)
    assert v.rule != RULE, v.summary


def test_a_rank_of_a_multi_rank_job_is_left_to_the_peer_rows(tmp_path: Path) -> None:
    """Its peers may be on hosts outside the capture (the spin an RDMA poll)."""
    data = recorded_json("native_spin_dead_peer")
    root = data["target"]["root_pid"]
    for p in data["processes"]:
        if p["pid"] == root:
            p["rank"], p["world_size"] = 0, 2
    v = judge_variant(data, tmp_path)
    assert v.rule != RULE, v.summary


def test_another_process_of_the_job_computing_may_be_the_writer(tmp_path: Path) -> None:
    """The resource tracker made to burn CPU: what it computes may end the spin."""
    data = recorded_json("native_spin_dead_peer")
    root = data["target"]["root_pid"]
    for i, sample in enumerate(data["samples"]):
        for ps in sample["processes"]:
            if ps["pid"] != root:
                ps["state"] = "R"
                ps["utime_ticks"] = ps.get("utime_ticks", 0) + 400 * i
                for t in ps["threads"]:
                    t["state"] = "R"
                    t["utime_ticks"] = t.get("utime_ticks", 0) + 400 * i
    v = judge_variant(data, tmp_path)
    assert v.rule != RULE, v.summary


def test_a_spinner_that_listens_is_a_server_polling_for_a_client(tmp_path: Path) -> None:
    """A busy-polling server (an RDMA receive queue, a shared-memory ring it set up for a
    client) spins for what a party outside the job writes: never deadlocked by this rule."""
    data = recorded_json("native_spin_dead_peer")
    root = data["target"]["root_pid"]
    for sample in data["samples"]:
        for ps in sample["processes"]:
            if ps["pid"] == root:
                ps["listen_ports"] = [18515]
    v = judge_variant(data, tmp_path)
    assert v.rule != RULE, v.summary
    assert v.state == "idle", v.summary  # a server waiting for work, not a peer wait
    assert "libspin's `wait_flag`, a busy-wait in a PAUSE loop" in v.summary


def test_a_listening_rank_of_several_still_waits_on_its_peers(tmp_path: Path) -> None:
    """Rank 0 of a torchrun job listens (the c10d store): its spin waits on a peer."""
    data = recorded_json("native_spin_dead_peer")
    root = data["target"]["root_pid"]
    for p in data["processes"]:
        if p["pid"] == root:
            p["rank"], p["world_size"] = 0, 2
    for sample in data["samples"]:
        for ps in sample["processes"]:
            if ps["pid"] == root:
                ps["listen_ports"] = [29500]
    v = judge_variant(data, tmp_path)
    assert v.state == "deadlocked" and v.rule == "peers_wait", v.summary
