"""Slow because of the machine, on real processes (issue #37): a gloo rank under a real cgroup
v1 CPU quota, and one at nice 19 beside CPU hogs, each read slow with its cause named - never
"deadlocked: rank 1 diverged; no CPU" - and the same job without them progressing."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]

CPU_V1 = Path("/sys/fs/cgroup/cpu")
QUOTA_US, PERIOD_US = 3000, 100000  # 0.03 of a core


@pytest.fixture
def cpu_cgroup() -> Iterator[Path]:
    """A child group of the v1 cpu controller limited to 0.03 of a core, removed afterwards
    (its tasks moved back to the root group first); skipped where it cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup")
    if not (CPU_V1 / "cpu.cfs_quota_us").exists():
        pytest.skip("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu (a v2-only host)")
    group = CPU_V1 / f"diag-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (group / "cpu.cfs_quota_us").write_text(f"{QUOTA_US}\n")
    except OSError as exc:
        if group.exists():
            group.rmdir()
        pytest.skip(f"cannot make a cpu cgroup with a quota here: {exc}")
    try:
        yield group
    finally:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pids = (group / "cgroup.procs").read_text().split()
            for pid in pids:
                try:
                    (CPU_V1 / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:
                    pass  # exited meanwhile
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.2)


def _capture(name: str, tmp_path: Path, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    started = start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], 240, env=env)
    try:
        out = tmp_path / f"{name}.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    data: Dict[str, Any] = json.loads(out.read_text())
    data["_out"] = str(out)
    return data


def test_a_rank_under_a_cgroup_cpu_quota_is_slow_with_its_limit_named(
    tmp_path: Path, cpu_cgroup: Path
) -> None:
    data = _capture("gloo_cpu_quota", tmp_path, {"DIAG_CPU_CGROUP": str(cpu_cgroup)})
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert (verdict["state"], verdict["rule"]) == ("slow", "cpu_held_back"), summary
    assert summary.startswith(
        "slow: rank 1 is throttled by its cgroup's CPU limit (0.03 of a core, throttled in "
    ), summary
    # Its peers are named as they wait in the last sample (one may be computing its share).
    assert re.search(r"; ranks? [0-2, ]+ waits? for it in `all_reduce`", summary), summary
    assert "raise the limit; don't kill" in summary
    assert "deadlocked" not in summary and "no CPU" not in summary
    assert [s.get("rank") for s in verdict["suspects"]] == [1]
    # The throttled share is the kernel's: nearly every period of the capture.
    share = int(summary.split("throttled in ")[1].split(" %")[0])
    assert share >= 80, summary
    limits = [
        p["cpu_limits"]
        for p in data["samples"][-1]["processes"]
        if p.get("cpu_limits", {}).get("quota_cores")
    ]
    assert [c["limit_group"] for c in limits] == [f"/{cpu_cgroup.name}"]
    assert limits[0]["quota_cores"] == 0.03 and limits[0]["version"] == "v1"
    out = Path(data["_out"])
    html, md = out.with_suffix(".html").read_text(), out.with_suffix(".md").read_text()
    assert 'id="machine"' in html and "0.03 of a core" in html
    assert "### Machine" in md and "of a core (/diag-test-" in md and "**(CPU limit)**" in md


def test_the_same_job_without_the_limit_is_progressing(tmp_path: Path) -> None:
    verdict = _capture("gloo_cpu_quota", tmp_path)["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
    assert verdict["rule"] != "cpu_held_back"


def test_a_rank_at_nice_19_beside_cpu_hogs_is_slow_with_its_run_queue_delay(
    tmp_path: Path,
) -> None:
    data = _capture("gloo_nice_hogs", tmp_path)
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert (verdict["state"], verdict["rule"]) == ("slow", "cpu_held_back"), summary
    assert summary.startswith("slow: rank 1 waits for a CPU at a low priority (nice 19, "), summary
    assert "run-queue delay" in summary
    # Its peers are named when they wait on it at the last sample (beside 4 hogs on 2 cores
    # they may be computing their own share at that instant).
    if "for it in" in summary:
        assert re.search(r"; ranks? [0-2, ]+ waits? for it in `all_reduce`", summary), summary
    assert "deadlocked" not in summary
    assert [s.get("rank") for s in verdict["suspects"]] == [1]
