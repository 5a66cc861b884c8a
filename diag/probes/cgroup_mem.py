"""What bounds a process's memory: its memory cgroup's limit against its usage, the group's
limit events, major faults and pressure (issue #37).

Why: a rank whose container is at its memory limit spends its time in reclaim - its page
cache evicted and read back, its threads stalled in the kernel - and reads as a rank that does
nothing. The kernel counts it: the group's usage sits at its limit, ``failcnt`` /
``memory.events`` (high, max) grow with each charge that hit the limit, ``pgmajfault`` with
each page read back, and (v2, and the host's ``/proc/pressure/memory``) the share of time
tasks stalled on memory. An OOM kill is counted too (``oom_kill``): a death, never "slow".

v1: the line of ``/proc/PID/cgroup`` whose controllers include ``memory``, read under the v1
``memory`` mount: ``memory.limit_in_bytes`` (a page-rounded 2^63 means none),
``memory.usage_in_bytes``, ``memory.failcnt``, ``memory.oom_control`` (``oom_kill``) and
``memory.stat`` (``total_pgmajfault``). v2: the ``0::`` line under the cgroup2 mount:
``memory.max`` / ``memory.high`` ("max": none), ``memory.current``, ``memory.events``
(``high``, ``max``, ``oom_kill``), ``memory.stat`` (``pgmajfault``), ``memory.pressure``.

Bounded and failing alone as ``cgroup_cpu`` is: capped reads of kernel pseudo-files, group
paths checked to stay under their mount, a file that cannot be read leaves its field None.
"""

from __future__ import annotations

import os
import time
from typing import Dict, NamedTuple, Optional, Tuple

from diag.model import MemLimits
from diag.probes.cgroup_cpu import (
    _group_dir,
    controller_mounts,
    parse_flat_keyed,
    parse_pressure,
    parse_proc_cgroup,
)
from diag.probes.procfs import ProcFS, read_capped

MAX_FILE_BYTES = 8192
UNLIMITED_BYTES = 1 << 60  # v1 reports "no limit" as a page-rounded 2^63
HOST_PSI_TTL_S = 1.0


class MemMounts(NamedTuple):
    """The v1 ``memory`` controller's mount and the v2 mount: (mount point, its root)."""

    memory_v1: Optional[Tuple[str, str]] = None
    v2: Optional[Tuple[str, str]] = None


def parse_mem_mounts(text: str) -> MemMounts:
    """The memory cgroup mounts of a mountinfo text."""
    v1, v2 = controller_mounts(text, ("memory",))
    return MemMounts(v1.get("memory"), v2)


def _int(text: Optional[str]) -> Optional[int]:
    """An integer file; None for "max", empty or unreadable."""
    if text is None:
        return None
    word = text.strip()
    return int(word) if word.isdigit() else None


def _limit(text: Optional[str]) -> Optional[int]:
    value = _int(text)
    return value if value is not None and value < UNLIMITED_BYTES else None


def _read(directory: str, name: str) -> Optional[str]:
    data = read_capped(os.path.join(directory, name), MAX_FILE_BYTES)
    return None if data is None else data.decode("utf-8", "replace")


def parse_oom_control(text: str) -> Optional[int]:
    """v1 ``memory.oom_control``: its ``oom_kill`` count (kernels since 4.13)."""
    return parse_flat_keyed(text).get("oom_kill")


def read_group(directory: str, version: str) -> Dict[str, Optional[int]]:
    """The memory figures of one group directory."""
    if version == "v2":
        events = parse_flat_keyed(_read(directory, "memory.events") or "")
        stat = parse_flat_keyed(_read(directory, "memory.stat") or "")
        return {
            "limit_bytes": _limit(_read(directory, "memory.max")),
            "high_bytes": _limit(_read(directory, "memory.high")),
            "usage_bytes": _int(_read(directory, "memory.current")),
            "high_events": events.get("high"),
            "max_events": events.get("max"),
            "oom_kills": events.get("oom_kill"),
            "pgmajfault": stat.get("pgmajfault"),
        }
    stat = parse_flat_keyed(_read(directory, "memory.stat") or "")
    oom = _read(directory, "memory.oom_control")
    return {
        "limit_bytes": _limit(_read(directory, "memory.limit_in_bytes")),
        "usage_bytes": _int(_read(directory, "memory.usage_in_bytes")),
        "max_events": _int(_read(directory, "memory.failcnt")),
        "oom_kills": parse_oom_control(oom) if oom is not None else None,
        "pgmajfault": stat.get("total_pgmajfault", stat.get("pgmajfault")),
    }


_MAX_GROUPS = 256  # groups kept at once (a host of many containers)


class MemLimitReader:
    """Reads ``MemLimits`` per process: the mounts once, the host's pressure once a second,
    a group's figures once a sample (``GROUP_TTL_S``)."""

    # The ranks of a job share a group: read once within a sample's burst, its ~6 files
    # (``memory.stat`` the dearest) were ~0.3 ms of each rank's read; a sample of 8 ranks
    # lasts ~0.05 s, and the next one is an interval (>= 0.1 s) later.
    GROUP_TTL_S = 0.05

    def __init__(self, procfs: ProcFS, mounts: Optional[MemMounts] = None) -> None:
        self.procfs = procfs
        self.mounts = mounts if mounts is not None else read_mem_mounts(procfs)
        self._host: Tuple[float, Optional[float]] = (-HOST_PSI_TTL_S, None)
        self._groups: Dict[Tuple[str, str], Tuple[float, MemLimits]] = {}

    def host_pressure(self) -> Optional[float]:
        now = time.monotonic()
        if now - self._host[0] >= HOST_PSI_TTL_S:
            data = read_capped(os.path.join(str(self.procfs.root), "pressure", "memory"), 512)
            avg10 = parse_pressure(data.decode("ascii", "replace"))[0] if data else None
            self._host = (now, avg10)
        return self._host[1]

    def read(self, pid: int) -> Optional[MemLimits]:
        """``pid``'s memory group's figures; None when its cgroup file is unreadable or its
        group lies outside what diag's mounts show."""
        text = read_capped(os.path.join(str(self.procfs.root), str(pid), "cgroup"), 4096)
        if text is None:
            return None
        groups = parse_proc_cgroup(text.decode("utf-8", "replace"))
        if "memory" in groups and self.mounts.memory_v1 is not None:
            version, mount, path = "v1", self.mounts.memory_v1, groups["memory"]
        elif "" in groups and self.mounts.v2 is not None:
            version, mount, path = "v2", self.mounts.v2, groups[""]
        else:
            return None
        now = time.monotonic()
        known = self._groups.get((version, path))
        if known is not None and now - known[0] < self.GROUP_TTL_S:
            return known[1]
        directory = _group_dir(mount, path)
        if directory is None:
            return None
        figures = read_group(directory, version)
        psi = None
        if version == "v2":
            psi = parse_pressure(_read(directory, "memory.pressure") or "")[0]
        limits = MemLimits(
            version=version,  # type: ignore[arg-type]
            group=path[:256],
            pressure_some_avg10=psi,
            host_pressure_some_avg10=self.host_pressure(),
            **figures,
        )
        if len(self._groups) >= _MAX_GROUPS:
            self._groups.clear()
        self._groups[(version, path)] = (now, limits)
        return limits


def read_mem_mounts(procfs: ProcFS) -> MemMounts:
    """diag's own memory cgroup mounts (once per capture); none when unreadable."""
    data = read_capped(os.path.join(str(procfs.root), "self", "mountinfo"), 1 << 20)
    return parse_mem_mounts(data.decode("utf-8", "replace")) if data else MemMounts()
