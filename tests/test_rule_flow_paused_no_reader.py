"""Rule ``flow_paused`` on a stream writer with no reader at all (``flow_control``'s
``unconnected``): a ZeroMQ PUSH send blocked while the process's only socket listens with no
connection - its reader was killed and reaped (zmq_push_consumer_died), or has not connected
yet. The capture cannot tell which (no TIME_WAIT after a SIGKILL with unread data, no zombie
after a reap), so the state stays flow_paused's, but the sentence no longer sends the user to
"py-spy dump" a receiving process that does not exist: it says no process is connected, both
causes, and the CPU of the children it reaped. Built from zmq_push_stalled's recording with the
reader and its connection taken away.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from recorded_variants import judge_variant, recorded_json

Json = Dict[str, Any]


def _no_reader(socket_fds: Optional[int], children_ticks: int = 0) -> Json:
    data = recorded_json("zmq_push_stalled")
    root = data["target"]["root_pid"]
    data["processes"] = [p for p in data["processes"] if p["pid"] == root]
    for sample in data["samples"]:
        sample["processes"] = [ps for ps in sample["processes"] if ps["pid"] == root]
        for ps in sample["processes"]:
            ps["fd_ends"] = [e for e in ps["fd_ends"] if e["kind"] != "tcp" or not e.get("remote")]
            ps["socket_fds"] = socket_fds
            ps["children_ticks"] = children_ticks
    return data


def test_a_writer_whose_only_socket_listens_says_no_reader_is_connected(tmp_path: Path) -> None:
    v = judge_variant(_no_reader(socket_fds=1, children_ticks=5), tmp_path)
    assert v.rule == "flow_paused", v.summary
    assert "no process is connected to it at all" in v.summary
    assert "port 36937" in v.summary and "has not connected yet" in v.summary
    assert "reaped children that ran (0.05 s of CPU)" in v.summary
    assert "py-spy dump it" not in v.summary


def test_sockets_not_all_seen_keep_the_old_sentence(tmp_path: Path) -> None:
    """Its socket count unread, or another socket beside the listener (a unix pair whose
    peer was not recorded): no claim that nothing is connected."""
    for count in (None, 2):
        v = judge_variant(_no_reader(socket_fds=count), tmp_path)
        assert v.rule == "flow_paused", v.summary
        assert "no process is connected" not in v.summary
