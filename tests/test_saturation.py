"""Verdicts unchanged on a saturated host (issue 27): scenarios captured beside CPU hogs.

Three scenario programs with distinct states (``samples/run_scenarios.py``'s table says what
each must read) are captured with ``diag capture --pid`` and its defaults while CPU-bound
processes keep every core busy; the state must be the one the quiet capture gives, and the
samples must keep their schedule (a late sample is recorded, and the capture is not stretched).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from conftest import REPO, SCENARIOS, run_diag, start_ready

from bench.saturation import start_hogs, stop_hogs

_spec = importlib.util.spec_from_file_location(
    "run_scenarios", REPO / "samples" / "run_scenarios.py"
)
assert _spec is not None and _spec.loader is not None
run_scenarios = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("run_scenarios", run_scenarios)
_spec.loader.exec_module(run_scenarios)

# Quick to start, stdlib only, and three different states: deadlocked, idle, progressing.
CHOSEN = ("lock_order", "http_idle", "stdout_progress")
HOGS_PER_CORE = 2  # every core has more runnable work than it can run
BY_NAME = {s.name: s for s in run_scenarios.SCENARIOS}


@pytest.mark.slow
@pytest.mark.parametrize("name", CHOSEN)
def test_state_unchanged_beside_cpu_hogs(name: str, tmp_path: Path) -> None:
    scenario = BY_NAME[name]
    started = start_ready(
        [sys.executable, str(SCENARIOS / f"{name}.py")], timeout_s=run_scenarios.READY_TIMEOUT_S
    )
    hogs = start_hogs(HOGS_PER_CORE * (os.cpu_count() or 1))
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        stop_hogs(hogs)
        started.stop()
    assert done.returncode == 0, done.stderr
    bundle: Dict[str, Any] = json.loads(out.read_text())
    verdict = bundle["verdict"]
    assert scenario.accepts(verdict["state"]), (verdict["state"], verdict["summary"])
    samples = bundle["samples"]
    assert len(samples) == 3  # the defaults: none lost to the load
    # The schedule holds: sample i starts ~i x 2 s after the first, however busy the host;
    # what lateness there is, is on record.
    t0 = samples[0]["t_s"]
    for i, sample in enumerate(samples):
        assert sample["t_s"] - t0 == pytest.approx(2.0 * i + sample.get("late_s", 0.0), abs=0.1)
