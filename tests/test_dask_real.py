"""Dask distributed for real: a worker that paused itself for memory is a wait with a party -
memory - that can end it, never an idle cluster (#31, the Dask pack's ``flow_pauses``).

``samples/scenarios/dask_worker_paused.py``: a LocalCluster with one worker (a spawned
process under the client's nanny) leaks ~87% of its 600 MiB limit into memory dask does not
manage; distributed's memory monitor logs "Worker is at 87% memory usage. Pausing worker." and
the client waits on ten tasks the worker will not start. By CPU and stacks alone that read
"deadlocked: requests unanswered" (the scheduler's port) - and, without the requests, idle.
``--running``: the contrast - tasks run and the client logs each result (progressing).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("distributed") is None, reason="dask[distributed] not installed"
    ),
]

PROGRAM = str(SCENARIOS / "dask_worker_paused.py")
FLAGS = ["--count", "3", "--interval", "1"]


def _capture(tmp_path: Path, *extra: str) -> Tuple[str, Dict[str, Any]]:
    """(the READY line, the bundle) of one capture of the scenario."""
    started = start_ready([sys.executable, PROGRAM, *extra], timeout_s=120)
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), *FLAGS, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    return started.lines[-1], json.loads(out.read_text())


def _worker_pid(bundle: Dict[str, Any]) -> int:
    """The spawned worker process (multiprocessing's spawn_main under the nanny)."""
    (pid,) = [p["pid"] for p in bundle["processes"] if "spawn_main" in " ".join(p["cmdline"])]
    return int(pid)


def _why(v: Dict[str, Any]) -> str:
    return json.dumps({k: v.get(k) for k in ("summary", "rule")} | {"graph": v["graph"]["chains"]})


def test_a_worker_paused_for_memory_is_slow_and_names_its_threshold(tmp_path: Path) -> None:
    ready, bundle = _capture(tmp_path)
    assert ready.split()[1:] == ["paused"], ready  # the scheduler saw the worker paused
    v, worker = bundle["verdict"], _worker_pid(bundle)
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    summary = v["summary"]
    assert f"pid {worker}, a Dask distributed worker, paused itself at 8" in summary, summary
    assert "`distributed.worker.memory.pause` threshold is 80% by default" in summary, summary
    assert "of its 600.00 MiB limit" in summary and "Pausing worker." in summary, summary
    assert [s["pid"] for s in v["suspects"]][:1] == [worker], v["suspects"]
    # The graph draws the party that ends the pause: the worker's memory.
    edges = {(e["src"], e["dst"], e["kind"]) for e in v["graph"]["edges"]}
    assert (f"/{worker}", "outside:memory", "flow") in edges, _why(v)
    # ... and the client that waits on the worker's tasks leads to it.
    assert any(f"pid {worker}" in c and "outside: memory" in c for c in v["graph"]["chains"]), _why(
        v
    )


def test_a_worker_whose_log_diag_cannot_read_is_judged_by_its_memory(tmp_path: Path) -> None:
    """`dask scheduler` and `dask worker --memory-limit 600MiB` with their output in
    /dev/null: no pause line to read, yet the worker holds more than 80% of the limit its
    nanny's command line gives - most likely paused, said as such (before: "deadlocked: ... a
    cycle of requests ... Restart it")."""
    ready, bundle = _capture(tmp_path, "--cli")
    assert ready.split()[1:] == ["paused"], ready
    v, worker = bundle["verdict"], _worker_pid(bundle)
    assert v["state"] == "slow", _why(v)
    assert v["rule"] == "flow_paused", _why(v)
    assert f"pid {worker}, a Dask distributed worker, has most likely paused" in v["summary"]
    assert "of its 600.00 MiB limit" in v["summary"] and "No pause line was read" in v["summary"]
    assert [s["pid"] for s in v["suspects"]][:1] == [worker], v["suspects"]
    edges = {(e["src"], e["dst"], e["kind"]) for e in v["graph"]["edges"]}
    assert (f"/{worker}", "outside:memory", "flow") in edges, _why(v)


def test_a_running_computation_is_progressing(tmp_path: Path) -> None:
    _, bundle = _capture(tmp_path, "--running")
    v = bundle["verdict"]
    assert v["state"] == "progressing", _why(v)
    assert not any(e["kind"] == "flow" for e in v["graph"]["edges"]), _why(v)
