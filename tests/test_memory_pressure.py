"""Under memory pressure (issue #37): the memory cgroup reader on recorded v1/v2 files, and on
real processes a job thrashing against a real cgroup v1 memory limit - slow, "under memory
pressure" with its group's usage, limit events and faults - beside the same job without the
limit (progressing)."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

import pytest
from conftest import REPO, SCENARIOS, run_diag, start_ready

from diag.bundle.io import load_bundle
from diag.probes.cgroup_mem import (
    MemLimitReader,
    MemMounts,
    parse_mem_mounts,
    read_group,
)
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_majflt
from diag.verdict.classify import classify

MEMORY_V1 = Path("/sys/fs/cgroup/memory")
LIMIT_BYTES = 48 << 20


def test_the_memory_mounts_are_read_from_mountinfo() -> None:
    text = (
        "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
        "31 25 0:27 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "32 25 0:28 /kubepods /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    assert parse_mem_mounts(text) == MemMounts(
        ("/sys/fs/cgroup/memory", "/"), ("/sys/fs/cgroup/unified", "/kubepods")
    )


def test_a_v2_group_gives_its_limit_usage_events_faults_and_pressure(tmp_path: Path) -> None:
    g = tmp_path / "pod"
    g.mkdir()
    (g / "memory.max").write_text("67108864\n")
    (g / "memory.high").write_text("max\n")
    (g / "memory.current").write_text("66060288\n")
    (g / "memory.events").write_text("low 0\nhigh 0\nmax 812\noom 0\noom_kill 0\n")
    (g / "memory.stat").write_text("anon 1024\nfile 65000000\npgmajfault 4321\n")
    (g / "memory.pressure").write_text(
        "some avg10=23.50 avg60=10.00 avg300=2.00 total=123456\n"
        "full avg10=20.00 avg60=8.00 avg300=1.00 total=100000\n"
    )
    (tmp_path / "proc" / "42").mkdir(parents=True)
    (tmp_path / "proc" / "42" / "cgroup").write_text("0::/pod\n")
    reader = MemLimitReader(ProcFS(str(tmp_path / "proc")), MemMounts(None, (str(tmp_path), "/")))
    got = reader.read(42)
    assert got is not None and got.version == "v2" and got.group == "/pod"
    assert (got.limit_bytes, got.high_bytes, got.usage_bytes) == (64 << 20, None, 66060288)
    assert (got.max_events, got.oom_kills, got.pgmajfault) == (812, 0, 4321)
    assert got.pressure_some_avg10 == 23.5


def test_a_v1_group_without_a_limit_reads_none(tmp_path: Path) -> None:
    (tmp_path / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (tmp_path / "memory.usage_in_bytes").write_text("1048576\n")
    (tmp_path / "memory.failcnt").write_text("0\n")
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (tmp_path / "memory.stat").write_text("pgmajfault 5\ntotal_pgmajfault 9\n")
    got = read_group(str(tmp_path), "v1")
    assert got["limit_bytes"] is None and got["usage_bytes"] == 1 << 20
    assert (got["max_events"], got["oom_kills"], got["pgmajfault"]) == (0, 2, 9)


def test_a_threads_major_faults_are_field_12_of_its_stat() -> None:
    line = "77 (a) b) S 1 77 77 0 -1 4194560 1200 0 345 0 10 5 0 0 20 0 1 0 99 1 1"
    assert parse_majflt(line) == 345


def test_the_recorded_thrash_is_slow_under_memory_pressure() -> None:
    """samples/scenarios/memory_cgroup_thrash.py captured under a 48 MiB v1 limit."""
    verdict = classify(load_bundle(REPO / "samples" / "bundles" / "memory_cgroup_thrash.json"))
    assert (verdict.state, verdict.rule) == ("slow", "memory_pressure"), verdict.summary
    assert "is under memory pressure (its cgroup uses " in verdict.summary
    assert "hit the limit during the capture" in verdict.summary


@pytest.fixture
def mem_cgroup() -> Iterator[Path]:
    """A child group of the v1 memory controller limited to 48 MiB, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup")
    if not (MEMORY_V1 / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory")
    group = MEMORY_V1 / f"diag-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(f"{LIMIT_BYTES}\n")
    except OSError as exc:
        if group.exists():
            group.rmdir()
        pytest.skip(f"cannot make a memory cgroup with a limit here: {exc}")
    try:
        yield group
    finally:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.2)  # its task is still exiting


def _capture(tmp_path: Path, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    script = str(SCENARIOS / "memory_cgroup_thrash.py")
    started = start_ready([sys.executable, script], 120, env=env)
    try:
        out = tmp_path / "thrash.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    data: Dict[str, Any] = json.loads(out.read_text())
    return data


@pytest.mark.slow
def test_a_job_thrashing_against_its_memory_limit_is_slow_under_pressure(
    tmp_path: Path, mem_cgroup: Path
) -> None:
    data = _capture(tmp_path, {"DIAG_MEM_CGROUP": str(mem_cgroup)})
    verdict = data["verdict"]
    summary = verdict["summary"]
    assert (verdict["state"], verdict["rule"]) == ("slow", "memory_pressure"), summary
    assert " is under memory pressure (its cgroup uses " in summary
    assert "of its 48.0 MiB limit" in summary and "don't kill" in summary
    limits = data["samples"][-1]["processes"][0]["mem_limits"]
    assert limits["group"] == f"/{mem_cgroup.name}" and limits["limit_bytes"] == LIMIT_BYTES


@pytest.mark.slow
def test_the_same_job_without_the_limit_progresses(tmp_path: Path) -> None:
    verdict = _capture(tmp_path)["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
    assert verdict["rule"] != "memory_pressure"


def test_ranks_of_one_group_read_it_once_a_sample(tmp_path: Path, monkeypatch: Any) -> None:
    """The ranks of a job share a group: within ``GROUP_TTL_S`` (one sample's burst) the
    second rank gets the figures the first read; the next sample reads them again."""
    g = tmp_path / "pod"
    g.mkdir()
    (g / "memory.max").write_text("67108864\n")
    (g / "memory.current").write_text("1000\n")
    for pid in (41, 42):
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text("0::/pod\n")
    reader = MemLimitReader(ProcFS(str(tmp_path / "proc")), MemMounts(None, (str(tmp_path), "/")))
    first = reader.read(41)
    (g / "memory.current").write_text("2000\n")
    same = reader.read(42)
    assert first is not None and same is not None
    assert first.usage_bytes == same.usage_bytes == 1000
    monkeypatch.setattr(MemLimitReader, "GROUP_TTL_S", 0.0)
    later = reader.read(42)
    assert later is not None and later.usage_bytes == 2000
