"""The GPU probe against the fake NVML (this machine has no GPU) and the real binding.

The fake (tests/fake_nvml/pynvml.py) is selected the way any module is: its directory first
on PYTHONPATH of the process that starts diag's NVML worker (the ``fake_nvml`` fixture of
conftest). Scenarios: no driver, a hanging nvmlInit, 8 GPUs with 8 rank PIDs, 100% utilisation
at idle power, host PIDs hidden by a container. The worker's lifetime (one per capture, a fresh
one after a hang, none left behind, none at all without a driver) is in test_gpu_worker.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from conftest import PROGRAMS, run_diag

from diag.bundle.io import load_bundle
from diag.collect.collector import Collector
from diag.model import GpuDevice, GpuProcess, GpuSample, ProcessInfo
from diag.probes.gpu.probe import GpuProbe, read_gpu
from diag.probes.runner import ProbeCall, ProbeError, run_all
from diag.verdict.gpu import map_devices_to_ranks


def test_real_binding_without_a_gpu_is_unavailable_not_an_error() -> None:
    sample = read_gpu(timeout_s=20)
    assert sample.available is False
    assert sample.reason and "NVML" in sample.reason  # "NVML Shared Library Not Found" here


def test_no_driver(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "no_driver")
    sample = read_gpu(timeout_s=20)
    assert sample == GpuSample(available=False, reason="NVML unavailable: Driver Not Loaded")


def test_missing_library_is_remembered(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "no_library")
    probe = GpuProbe(timeout_s=20)
    first = probe.read()
    assert not first.available and "Library Not Found" in (first.reason or "")
    assert probe.worker_pid is None  # the answer cannot change: the worker was closed
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "gpus")  # would answer now, but is not asked again
    assert probe.read() == first


def test_hanging_nvml_is_killed_at_the_timeout(
    fake_nvml: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "hung"
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "hang")
    fake_nvml.setenv("FAKE_NVML_HANG_FILE", str(marker))
    with pytest.raises(ProbeError, match="did not answer within 3s"):
        read_gpu(timeout_s=3)
    worker_pid = int(marker.read_text())  # the worker did reach nvmlInit and hung there
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{worker_pid}") and time.monotonic() < deadline:
        time.sleep(0.05)  # killed: gone once its parent (us) reaped it
    assert not os.path.exists(f"/proc/{worker_pid}")


def test_hanging_nvml_is_one_failure_and_the_rest_is_kept(
    fake_nvml: pytest.MonkeyPatch,
) -> None:
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "hang")
    probe = GpuProbe(timeout_s=2)
    gpu_result, other = run_all([probe.call(), ProbeCall("other", lambda: 42, 5.0)])
    assert gpu_result.value is None and gpu_result.failure is not None
    assert gpu_result.failure.probe == "gpu"
    assert "did not answer within 2s" in gpu_result.failure.reason
    assert other.value == 42 and other.failure is None


@pytest.mark.slow
def test_hanging_nvml_in_a_sample(fake_nvml: pytest.MonkeyPatch, spawn: Any) -> None:
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "hang")
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    collector = Collector(job.pid, probe_timeout_s=2.0)
    try:
        sample = collector.take_sample(0).sample
    finally:
        collector.close()
    assert sample.gpu is None
    assert [f.probe for f in sample.failures] == ["gpu"]
    assert "did not answer" in sample.failures[0].reason
    alive = [p for p in sample.processes if p.status == "alive"]
    assert len(alive) == 3 and all(p.threads for p in alive)  # launcher + 2 ranks, intact


def _rank_pids(job: Any) -> Dict[int, int]:
    return {int(k): v for k, v in json.loads(job.lines[-1].split("READY", 1)[1]).items()}


@pytest.mark.slow
def test_eight_gpus_map_to_eight_ranks(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "8"])
    ranks = _rank_pids(job)
    fake_nvml.setenv("FAKE_NVML_PIDS", ",".join(str(ranks[r]) for r in range(8)))
    out = tmp_path / "eight.json"
    result = run_diag(["capture", "--pid", str(job.pid), "--count", "1", "-o", str(out)])
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(out)
    gpu = bundle.samples[0].gpu
    assert gpu is not None and gpu.available and len(gpu.devices) == 8
    assert gpu.driver_version == "550.54.15"
    dev0 = gpu.devices[0]
    assert dev0.power_limit_w == 700.0 and dev0.mem_total_bytes == 80 * 1024**3
    assert dev0.processes[0].used_memory_bytes == 70 * 1024**3
    mapping = map_devices_to_ranks(gpu, bundle.processes)
    assert {i: (info.rank, how) for i, (info, how) in mapping.items()} == {
        i: (i, "pid") for i in range(8)
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "signal_text", "state"),
    [
        ("stuck", "not computing", "deadlocked"),
        ("busy", "computes", "slow"),
    ],
)
def test_util_with_power_gives_the_right_verdict(
    fake_nvml: pytest.MonkeyPatch,
    spawn: Any,
    tmp_path: Path,
    scenario: str,
    signal_text: str,
    state: str,
) -> None:
    """100% util at idle power is a kernel spinning on a peer; at full power it is work."""
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    ranks = _rank_pids(job)
    fake_nvml.setenv("FAKE_NVML_SCENARIO", scenario)
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    fake_nvml.setenv("FAKE_NVML_PIDS", f"{ranks[0]},{ranks[1]}")
    out = tmp_path / f"{scenario}.json"
    result = run_diag(
        ["capture", "--pid", str(job.pid), "--count", "2", "--interval", "0.5", "-o", str(out)]
    )
    assert result.returncode == 0, result.stderr
    verdict = load_bundle(out).verdict
    assert verdict is not None
    gpu_evidence = [e for e in verdict.evidence if e.signal == "gpu"]
    assert len(gpu_evidence) == 2
    assert all(signal_text in e.detail for e in gpu_evidence)
    assert sorted(r for e in gpu_evidence for r in e.ranks) == [0, 1]
    assert verdict.state == state, verdict.summary


def _dev(index: int, pids: tuple[int, ...] = (), uuid: str = "") -> GpuDevice:
    return GpuDevice(index=index, uuid=uuid, processes=tuple(GpuProcess(pid=p) for p in pids))


def test_container_hides_pids_env_maps_instead() -> None:
    """NVML reports host PIDs unknown here: CUDA_VISIBLE_DEVICES / LOCAL_RANK decide."""
    gpu = GpuSample(
        available=True,
        devices=tuple(_dev(i, (900000 + i,), f"GPU-aaaa{i}") for i in range(4)),
    )
    procs = [
        ProcessInfo(pid=10, rank=0, local_rank=0, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}),
        ProcessInfo(pid=11, rank=1, local_rank=1, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}),
        ProcessInfo(pid=12, rank=2, env={"CUDA_VISIBLE_DEVICES": "GPU-aaaa3"}),  # by UUID
        ProcessInfo(pid=13, rank=3, env={"LOCAL_RANK": "2"}),  # no CUDA_VISIBLE_DEVICES
    ]
    mapping = map_devices_to_ranks(gpu, procs)
    assert {i: (info.rank, how) for i, (info, how) in mapping.items()} == {
        0: (0, "env"),
        1: (1, "env"),
        3: (2, "env"),
        2: (3, "env"),
    }


def test_context_in_a_child_maps_to_its_rank() -> None:
    gpu = GpuSample(available=True, devices=(_dev(0, (21,)), _dev(1, (30,))))
    procs = [
        ProcessInfo(pid=20, rank=5, local_rank=0),
        ProcessInfo(pid=21, ppid=20, role="helper"),  # e.g. a worker process of rank 5
        ProcessInfo(pid=30, rank=6, local_rank=1),
    ]
    mapping = map_devices_to_ranks(gpu, procs)
    assert mapping[0][0].rank == 5 and mapping[0][1] == "pid:ancestor"
    assert mapping[1][0].rank == 6 and mapping[1][1] == "pid"


@pytest.mark.slow
def test_container_pids_still_name_ranks_in_the_verdict(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    """NVML lists host PIDs diag cannot see: the GPU evidence still names ranks (LOCAL_RANK)."""
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "hidden_pids")
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    out = tmp_path / "hidden.json"
    result = run_diag(["capture", "--pid", str(job.pid), "--count", "1", "-o", str(out)])
    assert result.returncode == 0, result.stderr
    verdict = load_bundle(out).verdict
    assert verdict is not None
    by_gpu = {e.detail.split()[1]: e.ranks for e in verdict.evidence if e.signal == "gpu"}
    assert by_gpu == {"0": (0,), "1": (1,)}


class _Unkillable:
    """Stands in for a worker stuck in the driver (D state): SIGKILL does not end it.

    This machine has no GPU driver to wedge; the probe only ever asks the worker ``poll()``."""

    pid = 4242

    def __init__(self) -> None:
        self.alive = True

    def poll(self) -> Optional[int]:
        return None if self.alive else -9


def test_a_worker_stuck_in_the_driver_is_not_doubled(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "hang")
    probe = GpuProbe(timeout_s=2)
    with pytest.raises(ProbeError, match="did not answer"):
        probe.read()
    stuck = _Unkillable()
    probe._hung = stuck  # type: ignore[assignment]  # as if SIGKILL had not ended it
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "gpus")
    with pytest.raises(ProbeError, match="NVML still hung: worker PID 4242"):
        probe.read()
    stuck.alive = False  # the driver recovered and the worker finally exited
    assert probe.read().available


def test_merged_hosts_each_have_a_gpu_0() -> None:
    """Two nodes, a GPU 0 each: evidence per (host, GPU), ranks from that host's processes."""
    from diag.model import Bundle, ProcessSample, Sample
    from diag.verdict.classify import classify

    def dev(host: str, pid: int) -> GpuDevice:
        return GpuDevice(index=0, host=host, util_gpu_pct=100.0, power_w=80.0,
                         power_limit_w=700.0, processes=(GpuProcess(pid=pid),))  # fmt: skip

    gpu = GpuSample(available=True, devices=(dev("a", 100), dev("b", 100)))
    procs = (
        ProcessInfo(pid=100, host="a", rank=0, local_rank=0, role="rank"),
        ProcessInfo(pid=100, host="b", rank=1, local_rank=0, role="rank"),
    )
    alive = tuple(ProcessSample(pid=100, host=h, t_s=1.0) for h in ("a", "b"))
    bundle = Bundle(
        processes=procs,
        samples=(Sample(index=0, t_s=1.0, processes=alive, gpu=gpu),),
    )
    evidence = [e for e in classify(bundle).evidence if e.signal == "gpu"]
    assert sorted((e.detail.split(" reads")[0], e.ranks) for e in evidence) == [
        ("GPU 0 on a", (0,)),
        ("GPU 0 on b", (1,)),
    ]
