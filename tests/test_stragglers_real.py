"""A real gloo job where one rank computes 4x longer per step: the capture names it, with its
figures, in the verdict, the HTML report and the Markdown; the same job balanced names none."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


def _capture(name: str, tmp_path: Path) -> Path:
    started = start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], timeout_s=240)
    try:
        out = tmp_path / f"{name}.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    return out


def test_the_slow_rank_is_named_with_its_figures_in_verdict_report_and_markdown(
    tmp_path: Path,
) -> None:
    out = _capture("gloo_straggler", tmp_path)
    verdict = json.loads(out.read_text())["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("output_moves", "progressing"), verdict
    assert [s.get("rank") for s in verdict["suspects"]] == [2]
    # the wording is the feature: the straggler and its figures, named in the verdict line
    assert "straggler: rank 2 computes" in verdict["summary"], verdict["summary"]
    loads = {r["rank"]: r for r in verdict["stragglers"]["ranks"]}
    assert loads[2]["main_cpu_pct"] >= 2 * max(loads[r]["main_cpu_pct"] for r in (0, 1, 3))
    # Each rank dumps its Flight Recorder every few steps: rank 2 enqueues its all_reduce last.
    assert loads[2]["fr_last_seq"] and loads[2]["fr_enqueue_lag_ms"] > max(
        loads[r]["fr_enqueue_lag_ms"] for r in (0, 1, 3)
    )
    assert "Flight Recorder: rank 2 enqueues its collectives" in verdict["summary"]
    html = out.with_suffix(".html").read_text()
    md = out.with_suffix(".md").read_text()
    assert 'id="stragglers"' in html and "waits for others" in html
    assert "straggler</span>" in html  # the tag on rank 2's row
    assert "### Stragglers" in md and "rank 2 **(straggler)**" in md


def test_a_balanced_job_names_no_straggler(tmp_path: Path) -> None:
    out = _capture("gloo_balanced_steps", tmp_path)
    verdict = json.loads(out.read_text())["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("output_moves", "progressing"), verdict
    assert verdict["stragglers"]["summary"].startswith("no straggler"), verdict["stragglers"]
    assert verdict.get("suspects", []) == []
    assert "no straggler" in out.with_suffix(".md").read_text()
