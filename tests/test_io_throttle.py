"""A saturated or throttled disk named as the cause (issue #37): the I/O throttle reader on
recorded v1/v2 files, and on real processes a gloo rank reading its shard from a loop device
its cgroup (v1 blkio) may read at 1 MiB/s while its peers wait - slow, with its rate, its ETA
and the throttle named - beside the same job without the throttle (progressing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest
from conftest import REPO, SCENARIOS, run_diag, start_ready

from diag.bundle.io import load_bundle
from diag.probes.cgroup_io import parse_bps_device, parse_io_max, parse_io_mounts
from diag.verdict.classify import classify

BLKIO_V1 = Path("/sys/fs/cgroup/blkio")
RATE = 1 << 20


def test_the_throttle_files_are_read_per_device() -> None:
    assert parse_bps_device("7:0 1048576\n8:0 0\n") == {"7:0": 1 << 20, "8:0": 0}
    assert parse_io_max("8:16 rbps=2097152 wbps=max riops=max wiops=max\n") == {
        "8:16": (2 << 20, None)
    }
    text = "30 25 0:26 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n"
    assert parse_io_mounts(text).blkio_v1 == ("/sys/fs/cgroup/blkio", "/")


def test_the_recorded_throttled_load_names_its_throttle() -> None:
    """samples/scenarios/gloo_load_throttled_disk.py captured under a 1 MiB/s blkio limit."""
    bundle = load_bundle(REPO / "samples" / "bundles" / "gloo_load_throttled_disk.json")
    verdict = classify(bundle)
    assert verdict.state == "slow", verdict.summary
    assert "rank 0 is I/O-throttled: its cgroup throttles reads from device " in verdict.summary
    assert "to 1.0 MiB/s - raise that limit" in verdict.summary


def _sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def _remove_group(group: Path) -> None:
    """Move what is left in ``group`` (a rank still exiting) to the root group, then remove it."""
    deadline = time.monotonic() + 10
    while group.exists() and time.monotonic() < deadline:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                (BLKIO_V1 / "cgroup.procs").write_text(f"{pid}\n")
            except OSError:
                pass  # exited meanwhile
        try:
            group.rmdir()
        except OSError:
            time.sleep(0.2)


@pytest.fixture
def throttled_disk() -> Iterator[Tuple[str, Path]]:
    """A 48 MiB file on a fresh ext4 loop device (cold cache) and a v1 blkio group that may
    read that device at 1 MiB/s; all removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root (losetup, mount, cgroups)")
    if not (BLKIO_V1 / "blkio.throttle.read_bps_device").exists():
        pytest.skip("no cgroup v1 blkio controller at /sys/fs/cgroup/blkio")
    if not (shutil.which("losetup") and shutil.which("mkfs.ext4")):
        pytest.skip("needs losetup and mkfs.ext4")
    image = Path(tempfile.mkstemp(prefix="diag-loop-", suffix=".img", dir="/var/tmp")[1])
    mnt = Path(tempfile.mkdtemp(prefix="diag-loopmnt-"))
    group = BLKIO_V1 / f"diag-test-{uuid.uuid4().hex[:8]}"
    dev = ""
    try:
        os.truncate(image, 96 << 20)
        dev = _sh("losetup", "-f", "--show", str(image))
        _sh("mkfs.ext4", "-q", dev)
        _sh("mount", dev, str(mnt))
        data = mnt / "model-00001-of-00001.bin"
        with open(data, "wb") as fh:
            for _ in range(48):
                fh.write(os.urandom(1 << 20))
        _sh("umount", str(mnt))
        _sh("mount", dev, str(mnt))  # a cold cache: the reads reach the device
        majmin = _sh("lsblk", "-dno", "MAJ:MIN", dev).strip()
        group.mkdir()
        (group / "blkio.throttle.read_bps_device").write_text(f"{majmin} {RATE}\n")
        yield str(data), group
    finally:
        _remove_group(group)
        subprocess.run(["umount", str(mnt)], capture_output=True)
        if dev:
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        image.unlink()
        mnt.rmdir()


def _capture(tmp_path: Path, env: Optional[Dict[str, str]]) -> Dict[str, Any]:
    script = str(SCENARIOS / "gloo_load_throttled_disk.py")
    started = start_ready([sys.executable, script], 240, env=env)
    try:
        out = tmp_path / "io.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    data: Dict[str, Any] = json.loads(out.read_text())
    return data


@pytest.mark.slow
@pytest.mark.torch
def test_a_rank_reading_through_a_throttled_disk_is_slow_with_the_throttle_named(
    tmp_path: Path, throttled_disk: Tuple[str, Path]
) -> None:
    path, group = throttled_disk
    env = {"DIAG_LOAD_PATH": path, "DIAG_BLKIO_CGROUP": str(group)}
    verdict = _capture(tmp_path, env)["verdict"]
    summary = verdict["summary"]
    assert verdict["state"] == "slow", summary
    assert summary.startswith("slow: rank 0 reads "), summary
    assert "rank 0 loading weights " in summary and ", ETA ~" in summary
    assert "rank 0 is I/O-throttled: its cgroup throttles reads from device " in summary
    assert "(model-00001-of-00001.bin's) to 1.0 MiB/s" in summary


@pytest.mark.slow
@pytest.mark.torch
def test_the_same_load_without_the_throttle_is_over_and_the_job_progresses(
    tmp_path: Path, throttled_disk: Tuple[str, Path]
) -> None:
    verdict = _capture(tmp_path, {"DIAG_LOAD_PATH": throttled_disk[0]})["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
    assert "I/O-throttled" not in verdict["summary"]
