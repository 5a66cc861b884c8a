"""Faults while diag runs (issue #17): signals, a full disk, a tracer already attached, odd
targets and flags. Each is real: a signal sent to the diag process, a tmpfs too small for the
outputs, strace attached to the target, a kernel thread from /proc."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DIAG, in_mount_namespace, run_diag

from diag.errors import EXIT_DISK_FULL, EXIT_USAGE
from diag.probes.procfs import ProcFS
from diag.probes.stacks import KIND_PERMISSION, StackError, find_pyspy, read_python_stacks
from diag.probes.threads import KERNEL_THREAD, read_threads

SLEEPER = [sys.executable, "-c", "import time\nprint('READY', flush=True)\ntime.sleep(300)"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_write_what_was_taken(spawn: Any, tmp_path: Path, signum: int) -> None:
    job = spawn(SLEEPER)
    out = tmp_path / "cap"
    diag = subprocess.Popen(
        [
            *DIAG,
            "capture",
            "--pid",
            str(job.pid),
            "--count",
            "1000",
            "--interval",
            "0.2",
            "-o",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3.0)
    diag.send_signal(signum)
    stdout, stderr = diag.communicate(timeout=60)
    assert diag.returncode == 0, stderr
    bundle = json.loads((tmp_path / "cap.json").read_text())
    assert 1 <= len(bundle["samples"]) < 1000
    assert (tmp_path / "cap.html").exists() and (tmp_path / "cap.md").exists()
    assert f"interrupted by {signal.Signals(signum).name}" in stderr + stdout


def test_full_disk_still_writes_what_fits_and_says_so(spawn: Any, tmp_path: Path) -> None:
    job = spawn(SLEEPER)
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = (
        f"mount -t tmpfs -o size=8k tmpfs {mnt} || exit 99\n"
        f"{' '.join(DIAG)} capture --pid {job.pid} --count 1 -o {mnt}/x\n"
        f"echo rc=$?\nls {mnt}\n"
    )
    result = in_mount_namespace(script)
    assert f"rc={EXIT_DISK_FULL}" in result.stdout, result.stdout + result.stderr
    assert "the disk is full" in result.stderr
    written = result.stdout.split("rc=", 1)[1].split()[1:]
    assert "x.md" in written or "x.json" in written, written  # what fit was written


def test_a_target_already_traced_is_named_with_its_tracer(tmp_path: Path) -> None:
    """py-spy's blocking attach (Python < 3.11) fails on a traced process even as root."""
    py310 = "/root/.pyenv/versions/3.10.13/bin/python3.10"  # a real binary, not a pyenv shim
    pyspy = find_pyspy()
    if not Path(py310).exists() or shutil.which("strace") is None or pyspy is None:
        pytest.skip("needs python3.10, strace and py-spy")
    target = subprocess.Popen([py310, "-c", "import time\nwhile True: time.sleep(0.5)"])
    tracer = None
    try:
        time.sleep(0.5)
        tracer = subprocess.Popen(
            ["strace", "-p", str(target.pid), "-o", "/dev/null"], stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status = Path(f"/proc/{target.pid}/status").read_text()
            if f"TracerPid:\t{tracer.pid}" in status:
                break
            time.sleep(0.05)
        with pytest.raises(StackError) as err:
            read_python_stacks(target.pid, 10.0, pyspy)
        assert err.value.kind == KIND_PERMISSION
        assert f"already traced by PID {tracer.pid} (strace) - detach it" in str(err.value)
        assert "root" not in str(err.value)
    finally:
        if tracer is not None:
            tracer.kill()
            tracer.wait()
        target.kill()
        target.wait()


def test_a_kernel_thread_does_not_read_as_waiting_on_stdin() -> None:
    procfs = ProcFS()
    kthreads = [
        pid
        for pid in procfs.pids()
        if (procfs.try_read_text(pid, "stat") or "").rpartition(")")[2].split()[1:2] == ["2"]
    ]
    if not kthreads:
        pytest.skip("no kernel thread visible (PID namespace)")
    (thread,) = read_threads(procfs, kthreads[0], os.uname().machine)[:1]
    assert thread.syscall == KERNEL_THREAD and thread.syscall_fd is None


@pytest.mark.parametrize("value", ["nan", "inf", "1e999", "-inf"])
def test_interval_must_be_a_finite_number(value: str) -> None:
    result = run_diag(["capture", "--pid", str(os.getpid()), f"--interval={value}"], timeout_s=30)
    assert result.returncode == EXIT_USAGE
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("diag: ") and "--help" in lines[0], lines
