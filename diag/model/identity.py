"""Who was captured: each process's identity, the host, the target (``diag.model``)."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from diag.model.base import Record
from diag.vocab import Role


class ProcessInfo(Record, frozen=True):
    """What does not change about a process: identity, role, rank, redacted argv and env."""

    pid: int
    host: str = ""
    ppid: Optional[int] = None
    name: str = ""
    exe: Optional[str] = None
    cmdline: Tuple[str, ...] = ()
    # launcher | worker | rank | server | helper | process
    role: Role = "process"
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    rank_source: Optional[str] = None  # e.g. "env:RANK", "argv:--tp-rank", "title:..._TP3"
    env: Dict[str, str] = {}
    start_time_s: Optional[float] = None
    first_seen_sample: int = 0
    uid: Optional[int] = None  # the process's owner: the only user whose dump files diag reads


class HostInfo(Record, frozen=True):
    hostname: str = ""
    kernel: str = ""
    machine: str = ""
    cpu_count: int = 0
    clk_tck: int = 100
    page_size_bytes: int = 4096
    boot_time_s: Optional[float] = None
    python_version: str = ""
    diag_version: str = ""
    pyspy_version: Optional[str] = None


class HostEntry(Record, frozen=True):
    """One host of a merged (multi-node) bundle: its identity, whether it was captured, and its
    clock. ``clock_offset_s`` is this host's clock minus the reference clock, *measured* (the
    Slurm controller timestamps a line each node prints); None when nothing measured it.
    ``start_offset_s`` is how far this host's first sample lies from the reference host's after
    any measured correction: skew and staggered starts are shown, never silently absorbed."""

    name: str
    status: str = "ok"  # ok | failed (no bundle from this host)
    reason: str = ""
    info: HostInfo = HostInfo()
    clock_offset_s: Optional[float] = None
    clock_offset_error_s: Optional[float] = None  # upper bound on the measurement's error
    clock_source: str = ""  # "srun-stdout" when measured; "" when not
    start_offset_s: Optional[float] = None
    samples: int = 0
    samples_dropped: int = 0  # samples past the shortest host's series, left out of the merge
    complete: bool = True


class Target(Record, frozen=True):
    """What was asked for: a PID, or a command diag launched (``launched``)."""

    root_pid: Optional[int] = None
    command: Tuple[str, ...] = ()
    launched: bool = False
    exit_code: Optional[int] = None
    log_paths: Tuple[str, ...] = ()
    hosts: Tuple[str, ...] = ()
