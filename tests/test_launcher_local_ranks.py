"""Rank identity under a launcher that gives its children only LOCAL_RANK and NODE_RANK and is
local rank 0 itself (Lightning's subprocess launcher, real, issue #37): the ranks' numbers are
the framework's own, so the diverging rank is named by its true number."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Dict

import pytest
from conftest import PROGRAMS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.skipif(
        importlib.util.find_spec("lightning") is None, reason="lightning not installed"
    ),
]

PROGRAM = PROGRAMS / "lightning_local_ranks.py"


def _ranks_by_pid(bundle: Dict[str, object], root: int) -> Dict[int, object]:
    procs = bundle["processes"]
    assert isinstance(procs, list)
    return {p["pid"]: p for p in procs}


def _capture(tmp_path: Path, env: Dict[str, str]) -> Dict[str, object]:
    started = start_ready([sys.executable, str(PROGRAM)], timeout_s=240, env=env)
    try:
        out = tmp_path / "fabric.json"
        done = run_diag(
            ["capture", "--pid", str(started.pid), "-o", str(out)],
            timeout_s=300,
        )
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    bundle = json.loads(out.read_text())
    bundle["_root"] = started.pid
    return bundle


def test_local_rank_children_and_the_launching_rank_0_get_their_true_numbers(
    tmp_path: Path,
) -> None:
    bundle = _capture(tmp_path, {})
    root = bundle["_root"]
    procs = [p for p in bundle["processes"] if p.get("rank") is not None]
    by_rank = {p["rank"]: p for p in procs}
    assert sorted(by_rank) == [0, 1, 2], [(p["pid"], p["rank"]) for p in procs]
    assert by_rank[0]["pid"] == root  # the launcher is rank 0 itself
    assert by_rank[0]["role"] == "rank"
    assert by_rank[1]["local_rank"] == 1 and by_rank[2]["local_rank"] == 2
    verdict = bundle["verdict"]
    assert verdict["state"] == "deadlocked", verdict["summary"]
    assert [s.get("rank") for s in verdict["suspects"]][:1] == [2], verdict["suspects"]
    assert "rank 2" in verdict["summary"], verdict["summary"]


def test_node_rank_offsets_the_family(tmp_path: Path) -> None:
    """Node 1 of 2 (node 0 never starts): ranks 3, 4, 5, whatever the rendezvous does."""
    bundle = _capture(tmp_path, {"NODE_RANK": "1", "TEST_NODES": "2"})
    ranks = sorted(p["rank"] for p in bundle["processes"] if p.get("rank") is not None)
    assert ranks == [3, 4, 5], ranks
