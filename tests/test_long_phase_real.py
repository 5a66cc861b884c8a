"""One rank's long phase while its peers wait, on real processes (issue #37): a gloo rank
reading its shard from a slow FUSE mount, and one downloading its weights from a local
rate-limited HTTP mirror, each while ranks 1, 2 wait in a barrier - slow, with the phase, its
rate and (for the file) how far and its ETA; never "progressing: rank 0 keeps writing output".
The same jobs with a fast source load before the capture and train: progressing. And a rank
compressing a checkpoint in native code while its peers wait: slow, "compressing"."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.torch,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]

FAST = {"DIAG_SOURCE_RATE": "1e9"}


def _needs_fuse() -> None:
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse")


def _capture(name: str, tmp_path: Path, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    started = start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], 240, env=env)
    try:
        out = tmp_path / f"{name}.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    data: Dict[str, Any] = json.loads(out.read_text())
    return data


def _mib_per_s(summary: str) -> float:
    found = re.search(r"([0-9.]+) (KiB|MiB)/s", summary)
    assert found, summary
    return float(found.group(1)) / (1024 if found.group(2) == "KiB" else 1)


def test_a_rank_downloading_from_a_slow_mirror_while_peers_wait_is_slow(tmp_path: Path) -> None:
    verdict = _capture("gloo_download_slow_mirror", tmp_path)["verdict"]
    summary = verdict["summary"]
    assert (verdict["state"], verdict["rule"]) == ("slow", "alone_in_phase"), summary
    assert summary.startswith("slow: rank 0 is alone in a phase - downloading"), summary
    assert 0.3 <= _mib_per_s(summary) <= 1.5, summary  # the mirror sends 1 MiB/s
    assert re.search(r"ranks? [12, \u2013-]+ waits? for it in `barrier`", summary), summary
    assert "keeps writing output" not in summary and "progressing" not in summary
    assert [s.get("rank") for s in verdict["suspects"]] == [0]


def test_the_same_download_from_a_fast_mirror_is_over_and_the_job_progresses(
    tmp_path: Path,
) -> None:
    verdict = _capture("gloo_download_slow_mirror", tmp_path, FAST)["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
    assert verdict["rule"] != "alone_in_phase"


def test_a_rank_reading_through_a_slow_mount_is_slow_with_its_rate_and_eta(
    tmp_path: Path,
) -> None:
    _needs_fuse()
    verdict = _capture("gloo_load_slow_mount", tmp_path)["verdict"]
    summary = verdict["summary"]
    assert verdict["state"] == "slow", summary
    assert summary.startswith("slow: rank 0 reads "), summary
    assert 0.3 <= _mib_per_s(summary) <= 1.5, summary  # the mount answers 1 MiB/s
    assert re.search(r"rank 0 loading weights [0-9]+%, ETA ~[0-9]+ (s|min)", summary), summary
    assert "deadlocked" not in summary and "progressing" not in summary


def test_the_same_load_from_a_fast_mount_is_over_and_the_job_progresses(tmp_path: Path) -> None:
    _needs_fuse()
    verdict = _capture("gloo_load_slow_mount", tmp_path, FAST)["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]


def test_a_rank_compressing_a_checkpoint_while_peers_wait_is_slow(tmp_path: Path) -> None:
    verdict = _capture("gloo_compress_checkpoint", tmp_path)["verdict"]
    summary = verdict["summary"]
    assert (verdict["state"], verdict["rule"]) == ("slow", "alone_in_phase"), summary
    assert summary.startswith("slow: rank 0 is alone in a phase - compressing, writes "), summary
    assert "/s (" in summary and "keeps writing output" not in summary
    assert re.search(r"ranks? [12, \u2013-]+ waits? for it in `barrier`", summary), summary


def test_the_same_compression_when_short_is_over_and_the_job_progresses(tmp_path: Path) -> None:
    verdict = _capture("gloo_compress_checkpoint", tmp_path, FAST)["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
