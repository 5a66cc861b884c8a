"""pyzmq for real: a blocking send at the high-water mark is a wait on the peer that stopped
reading, not an idle sender (#31, the pyzmq pack's ``flow_pauses``).

``samples/scenarios/zmq_push_stalled.py``: a "scheduler" (the root) pushes 64 KiB batches to
its "detokenizer" child over a ZeroMQ PUSH/PULL pair (SNDHWM/RCVHWM 16), as SGLang and vLLM
pass results between their processes; the detokenizer reads three and then sleeps. The
scheduler's main thread blocks in pyzmq's ``Socket.send``; by CPU and stacks alone that read
"idle: ... healthy, waiting for work". ``--reading``: the detokenizer reads steadily.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict, Set, Tuple

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("zmq") is None, reason="pyzmq not installed"),
]

PROGRAM = str(SCENARIOS / "zmq_push_stalled.py")
FLAGS = ["--count", "3", "--interval", "0.5"]


def _capture(tmp_path: Path, *extra: str) -> Tuple[int, int, Dict[str, Any]]:
    """(sender pid, receiver pid, the bundle's verdict) of one capture of the scenario."""
    started = start_ready([sys.executable, PROGRAM, *extra], timeout_s=60)
    try:
        receiver = int(started.lines[-1].split()[1])
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), *FLAGS, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    return started.pid, receiver, json.loads(out.read_text())["verdict"]


def _edges(v: Dict[str, Any]) -> Set[Tuple[str, str, str]]:
    return {(e["src"], e["dst"], e["kind"]) for e in v["graph"]["edges"]}


def _why(v: Dict[str, Any]) -> str:
    return json.dumps({k: v.get(k) for k in ("summary", "rule")} | {"graph": v["graph"]["chains"]})


def test_a_send_at_the_high_water_mark_waits_on_the_receiver(tmp_path: Path) -> None:
    sender, receiver, v = _capture(tmp_path)
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    assert "ZeroMQ socket's blocking send" in v["summary"] and "`send`" in v["summary"]
    assert f"the party that can end it: pid {receiver}, in `detokenize`" in v["summary"], _why(v)
    assert (f"/{sender}", f"/{receiver}", "flow") in _edges(v), _why(v)
    assert [s["pid"] for s in v["suspects"]][:2] == [receiver, sender], v["suspects"]


def test_a_receiver_that_reads_steadily_is_progressing(tmp_path: Path) -> None:
    _, _, v = _capture(tmp_path, "--reading")
    assert v["state"] == "progressing", _why(v)
    assert not any(kind == "flow" for _, _, kind in _edges(v)), _why(v)
