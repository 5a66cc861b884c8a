"""Bad input to ``diag capture``: one line naming the remedy, the documented exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from conftest import PROGRAMS, run_diag

from diag.errors import (
    EXIT_MISSING_TOOL,
    EXIT_NO_TARGET,
    EXIT_OUTPUT,
    EXIT_PERMISSION,
)


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diag: "), proc.stderr
    assert text in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("pid", ["0", "-5"])
def test_pid_not_positive(pid: str) -> None:
    _one_line_error(run_diag(["capture", f"--pid={pid}"]), EXIT_NO_TARGET, "invalid PID")


def test_pid_that_does_not_exist() -> None:
    pid = _reaped_pid()
    _one_line_error(run_diag(["capture", "--pid", str(pid)]), EXIT_NO_TARGET, "no process")


def _reaped_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_zombie_target(spawn) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2", "1"])
    pids: Dict[str, int] = json.loads(prog.lines[-1].split("READY", 1)[1])
    proc = run_diag(["capture", "--pid", str(pids["1"])])
    _one_line_error(proc, EXIT_NO_TARGET, "zombie")


def test_unwritable_output_path(spawn, tmp_path: Path) -> None:
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    out = tmp_path / "missing-dir" / "x.json"
    proc = run_diag(["capture", "--pid", str(prog.pid), "--count", "1", "-o", str(out)])
    _one_line_error(proc, EXIT_OUTPUT, "-o PATH")


def test_pyspy_missing(spawn, tmp_path: Path) -> None:
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    # A PATH with the basics but no py-spy, and a Python whose directory has no py-spy either.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python = bindir / "python"
    python.symlink_to(Path(sys.executable).resolve())
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", PYTHONPATH=_pythonpath())
    assert shutil.which("py-spy", path=env["PATH"]) is None
    proc = subprocess.run(
        [str(python), "-m", "diag", "capture", "--pid", str(prog.pid), "--count", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=str(tmp_path),
    )
    _one_line_error(proc, EXIT_MISSING_TOOL, "py-spy")


def _pythonpath() -> str:
    """The venv's site-packages and the repo, for a Python started outside the venv."""
    import msgspec

    import diag

    paths = [str(Path(diag.__file__).resolve().parent.parent)]
    paths.append(str(Path(msgspec.__file__).resolve().parent.parent))
    extra = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*paths, *([extra] if extra else [])])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root+setpriv")
def test_no_ptrace_permission(spawn) -> None:
    """diag without CAP_SYS_PTRACE against another user's process: a real EACCES."""
    prog = spawn(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            "echo READY; exec sleep 600",
        ]
    )
    proc = run_diag(
        ["capture", "--pid", str(prog.pid), "--count", "1"],
        wrapper=["setpriv", "--bounding-set=-all", "--inh-caps=-all"],
    )
    _one_line_error(proc, EXIT_PERMISSION, "CAP_SYS_PTRACE")


def test_thread_id_instead_of_pid(spawn) -> None:
    prog = spawn([sys.executable, str(PROGRAMS / "lock_waiters.py"), "1", "0"])
    tid = json.loads(prog.lines[-1].split("READY", 1)[1])["a"][0]
    proc = run_diag(["capture", "--pid", str(tid)])
    _one_line_error(proc, EXIT_NO_TARGET, f"pass --pid {prog.pid}")


def _kernel_thread_pid() -> int:
    from diag.probes.threads import is_kernel_thread

    for name in sorted(os.listdir("/proc"), key=lambda n: (len(n), n)):
        if name.isdigit():
            try:
                stat = Path("/proc", name, "stat").read_text()
            except OSError:
                continue
            if is_kernel_thread(stat):
                return int(name)
    pytest.skip("no kernel thread visible in this PID namespace")


def test_kernel_thread_target() -> None:
    """``--pid 2`` (kthreadd): one line saying it runs no user code, not an empty capture."""
    pid = _kernel_thread_pid()
    proc = run_diag(["capture", "--pid", str(pid), "--count", "1"])
    _one_line_error(proc, EXIT_NO_TARGET, f"PID {pid} is a kernel thread (")
    assert "it runs no user code to capture" in proc.stderr
    assert "pass the PID of a job process" in proc.stderr


def test_kernel_thread_target_recorded(tmp_path: Path) -> None:
    from diag.collect.target import check_target
    from diag.errors import DiagError
    from diag.probes.procfs import ProcFS

    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "stat").write_text(
        "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 26 0 0 "
        "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    )
    (tmp_path / "2" / "status").write_text("Name:\tkthreadd\nTgid:\t2\nPid:\t2\n")
    with pytest.raises(DiagError) as info:
        check_target(2, ProcFS(tmp_path))
    assert info.value.message == (
        "PID 2 is a kernel thread (kthreadd): it runs no user code to capture"
    )
    assert info.value.remedy == "pass the PID of a job process"
    assert info.value.exit_code == EXIT_NO_TARGET
