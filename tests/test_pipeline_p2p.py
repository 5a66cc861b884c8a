"""Point-to-point pipelines, real gloo ranks (samples/scenarios/gloo_pipeline_*.py): a stage's
``send``/``recv`` is a wait on its neighbour like a collective, so the stage that computes
while its neighbour waits in a receive is named the bottleneck, with its share and the remedy
(rebalance the split); an even split names nobody."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


def _capture(name: str, tmp_path: Path) -> Dict[str, Any]:
    started = start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], timeout_s=240)
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    verdict: Dict[str, Any] = json.loads(out.read_text())["verdict"]
    return verdict


def test_unbalanced_pipeline_names_the_bottleneck_stage(tmp_path: Path) -> None:
    verdict = _capture("gloo_pipeline_unbalanced", tmp_path)
    assert verdict["state"] == "progressing", verdict["summary"]
    stragglers = verdict["stragglers"]
    assert stragglers["suspects"] == [0], stragglers["summary"]
    summary = stragglers["summary"]
    assert summary.startswith("straggler: rank 0 computes"), summary
    assert "rank 1 wait for it in `recv`" in summary, summary
    assert "bottleneck stage of a pipeline - rebalance the split" in summary, summary
    assert 0 in [s.get("rank") for s in verdict["suspects"]], verdict["summary"]
    waiter = next(r for r in stragglers["ranks"] if r["rank"] == 1)
    assert waiter["peer_wait_samples"] >= 2 and waiter["wait_op"] == "`recv`"


def test_balanced_pipeline_names_no_straggler(tmp_path: Path) -> None:
    verdict = _capture("gloo_pipeline_balanced", tmp_path)
    assert verdict["state"] == "progressing", verdict["summary"]
    assert not verdict["stragglers"].get("suspects"), verdict["stragglers"]["summary"]
    assert verdict["stragglers"]["summary"].startswith("no straggler"), verdict["stragglers"]
    assert "rebalance" not in verdict["summary"]
