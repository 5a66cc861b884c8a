"""gRPC (grpcio) for real: a server-streaming RPC whose client stopped reading is a wait on
that client, not an idle server (#31, the gRPC pack's ``flow_pauses``).

``samples/scenarios/grpc_stream_stalled.py``: a trainer (the root) starts its data server,
reads three 256 KiB messages of the server's stream and then sleeps. HTTP/2 flow control
fills the client's window; the server's handler thread parks in grpc's ``_send_response`` on
an untimed ``Condition.wait``. By CPU and stacks alone that read "idle: ... healthy, waiting
for work". ``--reading``: the client reads steadily - the stream moves (progressing), though
the handler thread sits in the same frame between sends.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Set, Tuple

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("grpc") is None, reason="grpcio not installed"),
]

PROGRAM = str(SCENARIOS / "grpc_stream_stalled.py")
FLAGS = ["--count", "3", "--interval", "0.5"]


def _capture(tmp_path: Path, *extra: str, target: str = "root") -> Tuple[int, int, Dict[str, Any]]:
    """(client pid, server pid, the bundle's verdict) of one capture of the scenario; ``target``
    "server": diag is pointed at the server alone (its client outside the capture)."""
    started = start_ready([sys.executable, PROGRAM, *extra], timeout_s=60)
    try:
        server = int(started.lines[-1].split()[1])
        pid = server if target == "server" else started.pid
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(pid), *FLAGS, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    return started.pid, server, json.loads(out.read_text())["verdict"]


def _edges(verdict: Dict[str, Any]) -> Set[Tuple[str, str, str]]:
    return {(e["src"], e["dst"], e["kind"]) for e in verdict["graph"]["edges"]}


def _suspects(verdict: Dict[str, Any]) -> List[int]:
    return [s["pid"] for s in verdict["suspects"]]


def _why(verdict: Dict[str, Any], keys: Sequence[str] = ("summary", "rule")) -> str:
    return json.dumps({k: verdict.get(k) for k in keys} | {"chains": verdict["graph"]["chains"]})


def test_a_stalled_stream_waits_on_the_client_that_stopped_reading(tmp_path: Path) -> None:
    client, server, v = _capture(tmp_path)
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    assert "healthy" not in v["summary"] and "idle" not in v["summary"].split(":")[0]
    assert "`_send_response`" in v["summary"] and f"pid {client}" in v["summary"], _why(v)
    assert "HTTP/2 flow control" in v["summary"]
    # The wait-for graph draws the party that can end the wait: server -> (flow) -> client.
    assert (f"/{server}", f"/{client}", "flow") in _edges(v), _why(v)
    assert any(f"pid {server}" in c and "(flow)" in c for c in v["graph"]["chains"]), _why(v)
    # The client that stopped reading leads the suspects; the paused server follows.
    assert _suspects(v)[:2] == [client, server], v["suspects"]


def test_a_stream_read_steadily_is_progressing(tmp_path: Path) -> None:
    _, _, v = _capture(tmp_path, "--reading")
    assert v["state"] == "progressing", _why(v)
    assert v["rule"] == "answers_requests", _why(v)
    assert not any(kind == "flow" for _, _, kind in _edges(v)), _why(v)


def test_a_stalled_request_stream_waits_on_the_server_that_stopped_reading(
    tmp_path: Path,
) -> None:
    """The other direction: the client streams requests and the server's handler stopped
    reading them; the client's request writer waits for the server."""
    client, server, v = _capture(tmp_path, "--upload")
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    assert "`consume_request_iterator`" in v["summary"] and f"pid {server}" in v["summary"]
    assert (f"/{client}", f"/{server}", "flow") in _edges(v), _why(v)
    assert _suspects(v)[:2] == [server, client], v["suspects"]


def test_the_server_alone_waits_on_a_client_outside_the_capture(tmp_path: Path) -> None:
    """Pointed at the server only, the party is outside the capture: still not idle, and the
    wait ends at the peer's address."""
    client, server, v = _capture(tmp_path, target="server")
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    assert "not in this capture" in v["summary"], _why(v)
    flows = [(s, d) for s, d, k in _edges(v) if k == "flow"]
    assert flows and all(s == f"/{server}" for s, _ in flows), _why(v)
    assert client not in _suspects(v) and _suspects(v) == [server], v["suspects"]
