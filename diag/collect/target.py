"""Is this PID something diag can capture? Every bad target becomes a ``DiagError`` with its remedy.

Checked before anything is sampled or any output is created, so a typo in ``--pid`` costs one
line on stderr, not a capture's worth of waiting. py-spy is required here too: without it no
Python < 3.11 stack can be read, and a capture without stacks answers nothing.
"""

from __future__ import annotations

import errno

from diag.errors import (
    EXIT_MISSING_TOOL,
    EXIT_NO_TARGET,
    EXIT_PERMISSION,
    EXIT_TARGET_GONE,
    DiagError,
)
from diag.probes.procfs import ProcFS
from diag.probes.stacks import find_pyspy, traced_by
from diag.probes.threads import is_kernel_thread, parse_status

PTRACE_REMEDY = "run diag as root or as the target's user, or grant CAP_SYS_PTRACE"


def check_target(pid: int, procfs: ProcFS) -> None:
    """Fail early, with the remedy, on a PID diag cannot capture."""
    if pid <= 0:
        raise DiagError(f"invalid PID {pid}", "pass the PID of a running process", EXIT_NO_TARGET)
    try:
        stat = procfs.read_text(pid, "stat")
    except OSError:
        raise DiagError(
            f"no process with PID {pid}",
            "check the PID with `ps -ef` (the job may have exited)",
            EXIT_NO_TARGET,
        ) from None
    tgid_text = parse_status(procfs.try_read_text(pid, "status") or "").get("Tgid", "")
    tgid = int(tgid_text) if tgid_text.isdigit() else None
    if tgid is not None and tgid != pid:  # /proc/TID exists too, hidden from listings
        raise DiagError(
            f"{pid} is a thread of process {tgid}, not a process",
            f"pass --pid {tgid}",
            EXIT_NO_TARGET,
        )
    if is_kernel_thread(stat):
        name = stat.partition("(")[2].rpartition(")")[0]
        raise DiagError(
            f"PID {pid} is a kernel thread ({name}): it runs no user code to capture",
            "pass the PID of a job process",
            EXIT_NO_TARGET,
        )
    state = stat.rpartition(")")[2].split()[:1]
    if state and state[0] in ("Z", "X", "x"):
        raise DiagError(
            f"PID {pid} is a zombie (it exited; its parent has not reaped it)",
            "capture its parent or a live rank instead",
            EXIT_NO_TARGET,
        )
    try:
        procfs.read_bytes(pid, "environ")
    except PermissionError:
        tracer = traced_by(pid, procfs)
        if tracer is not None:
            raise DiagError(tracer, "", EXIT_PERMISSION) from None
        raise DiagError(
            f"no permission to inspect PID {pid}", PTRACE_REMEDY, EXIT_PERMISSION
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise DiagError(
                f"PID {pid} exited before diag could read it", "", EXIT_TARGET_GONE
            ) from None


def require_pyspy() -> str:
    pyspy = find_pyspy()
    if pyspy is None:
        raise DiagError(
            "py-spy not found",
            "install it (pip install py-spy, or make install) or put it on PATH",
            EXIT_MISSING_TOOL,
        )
    return pyspy
