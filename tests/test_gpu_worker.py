"""The NVML worker's lifetime: one process serves a whole capture, a hang costs one sample and
the next gets a fresh worker, nothing is left running after diag, and a host with no trace of
an NVIDIA driver gets its answer without any subprocess.

The worker serves the fake binding (conftest's ``fake_nvml``: this machine has no GPU); with
``FAKE_NVML_LOG_FILE`` it writes its own PID for every request it answers, so the tests see
which process served which sample.
"""

from __future__ import annotations

import importlib.util
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import DIAG, FAKE_NVML, PROGRAMS, REPO, run_diag, start_ready

from diag.collect.collector import Collector
from diag.model import GpuSample
from diag.probes.gpu.nvidia_host import NO_DRIVER_REASON, NVML_LIBRARY, nvidia_signs
from diag.probes.gpu.nvml_worker import NvmlSession, serve
from diag.probes.gpu.probe import GpuProbe, parse_worker_output
from diag.probes.procfs import ProcFS
from diag.probes.runner import run_all


def _served_by(log: Path) -> List[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def _is_worker(pid: int) -> bool:
    """A live (not zombie) process running diag's NVML worker."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"diag.probes.gpu.nvml_worker" in cmdline and _state(pid) not in ("Z", "")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def _wait_until(predicate: Any, deadline_s: float = 30.0) -> bool:
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


# -- the worker's own loop, in process -----------------------------------------------------


def _load_fake() -> Any:
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worker_answers_each_line_and_initialises_nvml_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _load_fake()
    calls: Dict[str, int] = {"init": 0, "shutdown": 0}
    monkeypatch.setattr(fake, "nvmlInit", lambda: calls.__setitem__("init", calls["init"] + 1))
    monkeypatch.setattr(
        fake, "nvmlShutdown", lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    )
    monkeypatch.setenv("FAKE_NVML_COUNT", "2")
    session = NvmlSession(fake)
    replies = io.StringIO()
    assert serve(session.read, io.StringIO("read\nread\nread\n"), replies) == 3
    session.shutdown()
    answers = [parse_worker_output(line) for line in replies.getvalue().splitlines()]
    assert len(answers) == 3 and all(a.available for a in answers)
    assert calls == {"init": 1, "shutdown": 1}


def test_a_failed_init_is_retried_on_the_next_request(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _load_fake()
    monkeypatch.setenv("FAKE_NVML_SCENARIO", "no_driver")
    session = NvmlSession(fake)
    assert session.read()["reason"] == "NVML unavailable: Driver Not Loaded"
    monkeypatch.setenv("FAKE_NVML_SCENARIO", "gpus")  # the driver finished loading
    assert session.read()["available"] is True


# -- one worker per capture ----------------------------------------------------------------


def test_several_samples_are_served_by_one_worker(
    fake_nvml: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "served"
    fake_nvml.setenv("FAKE_NVML_LOG_FILE", str(log))
    probe = GpuProbe(timeout_s=20)
    try:
        samples = [probe.read() for _ in range(3)]
        worker = probe.worker_pid
        assert worker is not None and _is_worker(worker)
    finally:
        probe.close()
    assert all(s.available and len(s.devices) == 8 for s in samples)
    assert _served_by(log) == [worker] * 3
    assert not _is_worker(worker) and probe.worker_pid is None


def test_a_hang_on_the_second_request_is_one_failure_then_a_fresh_worker(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    log = tmp_path / "served"
    fake_nvml.setenv("FAKE_NVML_LOG_FILE", str(log))
    fake_nvml.setenv("FAKE_NVML_HANG_AFTER", "1")  # each worker answers once, then wedges
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "1"])
    collector = Collector(job.pid, probe_timeout_s=2.0)
    try:
        first, hung, third = (collector.take_sample(i).sample for i in range(3))
        third_worker = collector.gpu_probe.worker_pid
    finally:
        collector.close()
    assert first.gpu is not None and first.gpu.available
    assert not [f for f in first.failures if f.probe == "gpu"]
    assert hung.gpu is None
    [failure] = [f for f in hung.failures if f.probe == "gpu"]
    assert "did not answer within 2s" in failure.reason
    assert failure.sample == 1
    assert third.gpu is not None and third.gpu.available
    served = _served_by(log)  # worker A: samples 0 and 1 (hung there); worker B: sample 2
    assert len(served) == 3 and served[0] == served[1] != served[2] == third_worker
    assert not _is_worker(served[0])  # the hung one was killed
    assert not _is_worker(served[2])  # and the fresh one closed with the collector


def test_a_worker_that_died_between_samples_is_replaced_silently(
    fake_nvml: pytest.MonkeyPatch,
) -> None:
    probe = GpuProbe(timeout_s=20)
    try:
        assert probe.read().available
        first = probe.worker_pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # the OOM killer, or a person
        assert _wait_until(lambda: _state(first) == "Z")  # dead, not yet reaped by the probe
        call = probe.call()
        [result] = run_all([call])
        assert result.failure is None and result.value is not None and result.value.available
        assert probe.worker_pid not in (None, first)
    finally:
        probe.close()


# -- nothing left behind -------------------------------------------------------------------


@pytest.mark.slow
def test_no_worker_is_left_after_diag_capture(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    log = tmp_path / "served"
    fake_nvml.setenv("FAKE_NVML_LOG_FILE", str(log))
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "1"])
    out = tmp_path / "cap.json"
    args = ["capture", "--pid", str(job.pid), "--count", "3", "--interval", "0.2", "-o", str(out)]
    result = run_diag(args)
    assert result.returncode == 0, result.stderr
    served = _served_by(log)
    assert len(served) == 3 and len(set(served)) == 1  # one worker served the capture
    assert not _is_worker(served[0])  # and it did not survive diag


@pytest.mark.slow
def test_ctrl_c_on_diag_watch_leaves_no_worker(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    log = tmp_path / "served"
    fake_nvml.setenv("FAKE_NVML_LOG_FILE", str(log))
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "1"])
    watch = subprocess.Popen(
        [*DIAG, "watch", "--pid", str(job.pid), "--interval", "0.5", "-o", str(tmp_path / "w")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO),
    )
    try:
        assert _wait_until(lambda: len(_served_by(log)) >= 2), "the watch never read NVML"
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert (tmp_path / "w.json").exists(), err
    served = _served_by(log)
    assert len(set(served)) == 1
    assert not _is_worker(served[0])


PROBE_THEN_WAIT = """
import sys, time
from diag.probes.gpu.probe import GpuProbe, parse_worker_output
probe = GpuProbe(timeout_s=20)
assert probe.read().available
print("READY", probe.worker_pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_the_worker_exits_when_diag_is_killed(fake_nvml: pytest.MonkeyPatch) -> None:
    """SIGKILL leaves diag no chance to close anything: the worker sees its stdin end."""
    owner = start_ready([sys.executable, "-c", PROBE_THEN_WAIT], cwd=REPO)
    worker = int(owner.lines[-1].split()[1])
    assert _is_worker(worker)
    owner.stop()  # SIGKILL to diag's group; the worker has its own session, so not to it
    assert _wait_until(lambda: not _is_worker(worker)), f"worker {worker} outlived its diag"


# -- no driver: no subprocess --------------------------------------------------------------


@pytest.fixture
def no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a subprocess was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)  # the one nvml_client uses


def test_no_driver_trace_answers_without_a_subprocess(tmp_path: Path, no_subprocess: None) -> None:
    (tmp_path / "proc").mkdir()
    probe = GpuProbe(
        timeout_s=20,
        driver_signs=lambda: nvidia_signs(ProcFS(tmp_path / "proc"), str(tmp_path), {}),
    )
    expected = GpuSample(available=False, reason=NO_DRIVER_REASON)
    assert probe.read() == expected
    assert probe.read() == expected  # remembered: nothing is looked at again
    assert probe.worker_pid is None


def test_this_host_without_a_driver_starts_no_worker(no_subprocess: None) -> None:
    if nvidia_signs():
        pytest.skip(f"this host has NVIDIA driver traces: {nvidia_signs()}")
    sample = GpuProbe(timeout_s=20).read()
    assert not sample.available and sample.reason == NO_DRIVER_REASON


@pytest.mark.parametrize(
    "trace",
    [
        "proc/driver/nvidia/",  # the kernel module
        "dev/nvidiactl",  # device nodes a container runtime injects
        f"usr/lib/x86_64-linux-gnu/{NVML_LIBRARY}",  # a library in a default directory
        f"opt/nv/{NVML_LIBRARY}",  # a library on LD_LIBRARY_PATH
        "etc/ld.so.cache",  # the loader cache knows the soname
    ],
)
def test_each_driver_trace_means_ask_the_worker(tmp_path: Path, trace: str) -> None:
    (tmp_path / "proc").mkdir()
    path = tmp_path / trace
    path.parent.mkdir(parents=True, exist_ok=True)
    if trace.endswith("/"):
        path.mkdir()
    elif trace == "etc/ld.so.cache":
        path.write_bytes(b"glibc-ld.so.cache1.1\0libc.so.6\0" + NVML_LIBRARY.encode() + b"\0")
    else:
        path.write_bytes(b"")
    environ = {"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path / 'opt' / 'nv'}"}
    signs = nvidia_signs(
        ProcFS(tmp_path / "proc"),
        str(tmp_path),
        environ,
        library_dirs=["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib"],
    )
    assert len(signs) == 1, signs


def test_the_cuda_toolkit_stub_is_not_a_driver(tmp_path: Path) -> None:
    """The toolkit ships stubs/libnvidia-ml.so (no .1) for linking; it cannot answer NVML."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "ld.so.cache").write_bytes(b"libnvidia-ml.so\0/usr/local/cuda/x\0")
    stubs = tmp_path / "cuda" / "stubs"
    stubs.mkdir(parents=True)
    (stubs / "libnvidia-ml.so").write_bytes(b"")
    environ = {"LD_LIBRARY_PATH": str(stubs)}
    assert nvidia_signs(ProcFS(tmp_path / "proc"), str(tmp_path), environ) == []
