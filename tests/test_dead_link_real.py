"""A wait on a dead link vs a wait on a stopped peer (issue #33), on real TCP connections.

No iptables or nft on this machine, and no netem: the dead host is a service whose accepted
socket drops every packet it receives (a classic-BPF socket filter - the kernel's own drop
path, so no acknowledgement ever leaves it). The job's request stays unacknowledged and its
retransmission timeout backs off: diag records tcp_info's counters on the connection
(``FdEnd.delivery``) and reads a dead link (rule ``peer_unreachable``). The contrast stops the
service's process instead: its kernel acknowledges the request, nothing is in flight, nothing
is recorded - the job waits on a stopped process outside it (``waits_on_stopped_outsider``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = pytest.mark.slow

Json = Dict[str, Any]


def _capture(name: str, tmp_path: Path, wait_s: float) -> Json:
    started = start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], 60)
    try:
        time.sleep(wait_s)
        out = tmp_path / f"{name}.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=120)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    bundle: Json = json.loads(out.read_text())
    return bundle


def _tcp_ends(bundle: Json) -> List[Json]:
    root = bundle["target"]["root_pid"]
    return [
        e
        for s in bundle["samples"]
        for ps in s["processes"]
        if ps["pid"] == root
        for e in ps.get("fd_ends", [])
        if e["kind"] == "tcp"
    ]


def test_a_request_to_a_dark_host_reads_a_dead_link(tmp_path: Path) -> None:
    bundle = _capture("tcp_peer_unreachable", tmp_path, 4.0)
    verdict = bundle["verdict"]
    assert (verdict["state"], verdict["rule"]) == ("deadlocked", "peer_unreachable"), verdict
    ends = _tcp_ends(bundle)
    assert len(ends) == len(bundle["samples"]), ends  # in every sample
    first, last = ends[0]["delivery"], ends[-1]["delivery"]
    assert last["unacked_segs"] >= 1 and last["rto_backoffs"] >= 2, last
    assert last["retrans_total"] >= first["retrans_total"] >= 2, (first, last)
    assert last["ack_age_ms"] > first["ack_age_ms"] >= 3000, (first, last)
    assert ends[-1]["owed"] is True  # its request went out, unacknowledged: a reply is owed
    summary = verdict["summary"]
    assert "kernel acknowledges nothing" in summary and "retransmission timeout backed off" in (
        summary
    )
    assert "host is down or the link to it is cut" in summary
    assert [s["pid"] for s in verdict["suspects"]] == [bundle["target"]["root_pid"]]


def test_a_request_to_a_stopped_service_has_nothing_in_flight(tmp_path: Path) -> None:
    bundle = _capture("tcp_peer_stopped", tmp_path, 4.0)
    verdict = bundle["verdict"]
    assert (verdict["state"], verdict["rule"]) == ("deadlocked", "waits_on_stopped_outsider")
    ends = _tcp_ends(bundle)
    assert ends and all("delivery" not in e for e in ends), ends  # acknowledged: nothing kept
    assert "acknowledges nothing" not in verdict["summary"]
    assert "kill -CONT" in verdict["summary"]
