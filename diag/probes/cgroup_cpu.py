"""What bounds a process's CPU: its cgroup's limit and throttling, its cpuset, nice and
policy; and the host's CPU demand (load against cores, pressure stall information).

Why: a rank in a container whose CPU limit is a few hundredths of a core is runnable in every
sample, burns almost nothing and logs a line a minute - exactly what a hang looks like from
stacks and CPU alone. The kernel knows better: the group's ``cpu.stat`` counts the scheduling
periods in which it was throttled, and the thread's run-queue delay grows while it waits.

cgroup v1 and v2 alike: ``/proc/PID/cgroup`` names the group (v1: the line whose controllers
include ``cpu``; v2: the ``0::`` line), the mount comes from diag's own mountinfo (read once
per capture), and the group's files are read from there: v2 ``cpu.max`` ("QUOTA PERIOD" or
"max PERIOD"), ``cpu.stat`` (``throttled_usec``), ``cpuset.cpus.effective``, ``cpu.pressure``;
v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1: none), ``cpu.stat`` (``throttled_time``
in ns), the cpuset hierarchy's ``cpuset.effective_cpus`` or ``cpuset.cpus``. A limit set on
a parent (a pod's group above its container's) binds too: the walk up to the mount's root
keeps the tightest, at most ``MAX_DEPTH`` levels.

Bounded and failing alone: every file is read capped (``MAX_FILE_BYTES``), paths are checked
to stay under the mount (no ``..``), a file that cannot be read leaves its field None, and
nothing here writes. All reads are of kernel pseudo-files, which do not block.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

import msgspec

from diag.model import CgroupVersion, CpuLimits, HostLoad, SchedPolicy
from diag.probes.procfs import ProcFS, read_capped

MAX_FILE_BYTES = 4096
MAX_CGROUP_LINES = 64
MAX_DEPTH = 8  # levels walked up from a process's group looking for a tighter limit
GROUP_CHARS = 256

_POLICIES: Dict[int, SchedPolicy] = {
    0: "normal",
    1: "fifo",
    2: "rr",
    3: "batch",
    5: "idle",
    6: "deadline",
}


class CgroupMounts(NamedTuple):
    """Where diag sees the hierarchies: the v1 ``cpu`` and ``cpuset`` controllers' mounts
    and the v2 mount, each as (mount point, the mount's root within the hierarchy)."""

    cpu_v1: Optional[Tuple[str, str]] = None
    cpuset_v1: Optional[Tuple[str, str]] = None
    v2: Optional[Tuple[str, str]] = None


Mount = Tuple[str, str]  # (mount point, the mount's root within the hierarchy)


def controller_mounts(
    text: str, controllers: Sequence[str]
) -> Tuple[Dict[str, Mount], Optional[Mount]]:
    """The first v1 mount of each of ``controllers`` and the v2 mount, from a mountinfo text
    (fields: id parent dev root mountpoint opts ... ``-`` fstype source superopts); one
    reading for the CPU, memory and I/O probes. Bounded to its first 4,096 lines."""
    v1: Dict[str, Mount] = {}
    v2: Optional[Mount] = None
    for line in text.splitlines()[:4096]:
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 3:
            continue
        where = (_unescape(fields[4]), _unescape(fields[3]))
        if after[0] == "cgroup2" and v2 is None:
            v2 = where
        elif after[0] == "cgroup":
            options = set(after[2].split(","))
            for name in controllers:
                if name in options and name not in v1:
                    v1[name] = where
    return v1, v2


def parse_mountinfo(text: str) -> CgroupMounts:
    """The CPU and cpuset cgroup mounts of a mountinfo text."""
    v1, v2 = controller_mounts(text, ("cpu", "cpuset"))
    return CgroupMounts(v1.get("cpu"), v1.get("cpuset"), v2)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    if "\\" not in field:
        return field
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def parse_proc_cgroup(text: str) -> Dict[str, str]:
    """``/proc/PID/cgroup`` -> {controller: path}; the v2 line is keyed ``""``."""
    out: Dict[str, str] = {}
    for line in text.splitlines()[:MAX_CGROUP_LINES]:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out.setdefault("", path)
        for c in controllers.split(","):
            out.setdefault(c, path)
    return out


def parse_cpu_max(text: str) -> Tuple[Optional[int], Optional[int]]:
    """v2 ``cpu.max``: (quota µs or None for "max", period µs)."""
    words = text.split()
    if len(words) != 2 or not words[1].isdigit():
        return None, None
    quota = int(words[0]) if words[0].isdigit() else None
    return quota, int(words[1])


def parse_flat_keyed(text: str) -> Dict[str, int]:
    """``cpu.stat``-style ``key value`` lines (integers only)."""
    out: Dict[str, int] = {}
    for line in text.splitlines()[:64]:
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def parse_pressure(text: str) -> Tuple[Optional[float], Optional[int]]:
    """The ``some`` line of a PSI file: (avg10 %, total µs)."""
    for line in text.splitlines()[:4]:
        words = line.split()
        if words and words[0] == "some":
            kv = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            try:
                return float(kv.get("avg10", "")), int(kv.get("total", ""))
            except ValueError:
                return None, None
    return None, None


def count_cpus(cpuset: str) -> Optional[int]:
    """ "0-3,8" -> 5; None when it does not parse."""
    total = 0
    try:
        for part in cpuset.strip().split(","):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            total += int(hi or lo) - int(lo) + 1
    except ValueError:
        return None
    return total or None


def _group_dir(mount: Tuple[str, str], path: str) -> Optional[str]:
    """The directory of group ``path`` under a mount, or None when it lies outside what the
    mount shows (another cgroup namespace) or the path tries to climb out of it."""
    point, root = mount
    if ".." in path.split("/"):
        return None
    if root not in ("", "/"):
        if path != root and not path.startswith(root.rstrip("/") + "/"):
            return None
        path = path[len(root.rstrip("/")) :]
    return os.path.join(point, path.lstrip("/")).rstrip("/") or "/"


def _read(directory: str, name: str) -> Optional[str]:
    data = read_capped(os.path.join(directory, name), MAX_FILE_BYTES)
    return None if data is None else data.decode("utf-8", "replace")


def _quota(directory: str, version: CgroupVersion) -> Tuple[Optional[int], Optional[int]]:
    """(quota µs or None, period µs) of one group."""
    if version == "v2":
        text = _read(directory, "cpu.max")
        return parse_cpu_max(text) if text is not None else (None, None)
    quota_text, period_text = (
        _read(directory, "cpu.cfs_quota_us"),
        _read(directory, "cpu.cfs_period_us"),
    )
    try:
        period = int(period_text) if period_text is not None else None
        quota = int(quota_text) if quota_text is not None else None
    except ValueError:
        return None, None
    return (quota if quota is not None and quota > 0 else None), period


def _tightest(
    group_dir: str, floor: str, version: CgroupVersion
) -> Tuple[str, Optional[int], Optional[int]]:
    """The group at or above ``group_dir`` (not above ``floor``, the mount point) whose limit
    gives the fewest cores: (its directory, quota µs, period µs); its own when none has one."""
    best: Tuple[str, Optional[int], Optional[int]] = (group_dir, None, None)
    directory = group_dir
    for _ in range(MAX_DEPTH):
        quota, period = _quota(directory, version)
        if best[2] is None and period:
            best = (best[0], None, period)
        if quota and period and (best[1] is None or quota / period < best[1] / (best[2] or 1)):
            best = (directory, quota, period)
        if os.path.normpath(directory) == os.path.normpath(floor):
            break
        directory = os.path.dirname(directory)
    return best


def _cpuset(mounts: CgroupMounts, groups: Dict[str, str], version: CgroupVersion) -> str:
    if version == "v2" and mounts.v2 is not None and "" in groups:
        d = _group_dir(mounts.v2, groups[""])
        text = _read(d, "cpuset.cpus.effective") if d else None
    elif mounts.cpuset_v1 is not None and "cpuset" in groups:
        d = _group_dir(mounts.cpuset_v1, groups["cpuset"])
        text = (_read(d, "cpuset.effective_cpus") or _read(d, "cpuset.cpus")) if d else None
    else:
        text = None
    return (text or "").strip()[:64]


class _Group(NamedTuple):
    """What changes only when someone edits the group: where it is, its limit, its cpuset."""

    directory: Optional[str]
    limit: CpuLimits  # version, group, limit_group, quota_cores, period_us, cpuset
    read_at_s: float


class CpuLimitReader:
    """Reads ``CpuLimits`` for the processes of a capture. Where a group is, its limit and
    its cpuset are read once per group and kept ``STATIC_TTL_S`` (ranks share a group, and a
    limit raised during a long watch is still seen); the counters (``cpu.stat``,
    ``cpu.pressure``) and ``/proc/PID/cgroup`` are read every time."""

    STATIC_TTL_S = 30.0

    def __init__(self, procfs: ProcFS, mounts: Optional[CgroupMounts] = None) -> None:
        self.procfs = procfs
        self.mounts = mounts if mounts is not None else read_mounts(procfs)
        self._groups: Dict[Tuple[str, str], _Group] = {}

    def read(self, pid: int, nice: int = 0, policy: int = 0) -> CpuLimits:
        """One process (``nice``/``policy``: from the /proc/PID/stat the caller already
        read). Raises OSError only when /proc/PID/cgroup cannot be read."""
        text = self.procfs.read_bytes_capped(pid, "cgroup", MAX_FILE_BYTES)
        groups = parse_proc_cgroup(text.decode("utf-8", "replace"))
        sched = {"nice": nice, "policy": _POLICIES.get(policy, "?")}
        mounts = self.mounts
        if "cpu" in groups and mounts.cpu_v1 is not None:
            version: CgroupVersion = "v1"
            mount, path = mounts.cpu_v1, groups["cpu"]
        elif "" in groups and mounts.v2 is not None:
            version, mount, path = "v2", mounts.v2, groups[""]
        else:
            return _with(CpuLimits(), **sched)
        group = self._group(version, mount, path, groups)
        if group.directory is None:
            return _with(group.limit, **sched)
        limit_dir = os.path.join(mount[0], group.limit.limit_group.lstrip("/"))
        stat = parse_flat_keyed(
            _read(limit_dir if group.limit.limit_group else group.directory, "cpu.stat") or ""
        )
        throttled_ns = stat.get("throttled_time") if version == "v1" else None
        if version == "v2" and "throttled_usec" in stat:
            throttled_ns = stat["throttled_usec"] * 1000
        avg10 = total_us = None
        if version == "v2":
            avg10, total_us = parse_pressure(_read(group.directory, "cpu.pressure") or "")
        return _with(
            group.limit,
            nr_periods=stat.get("nr_periods"),
            nr_throttled=stat.get("nr_throttled"),
            throttled_ns=throttled_ns,
            pressure_some_avg10=avg10,
            pressure_some_total_us=total_us,
            **sched,
        )

    def _group(
        self, version: CgroupVersion, mount: Tuple[str, str], path: str, groups: Dict[str, str]
    ) -> _Group:
        now = time.monotonic()
        key = (version, path)
        known = self._groups.get(key)
        if known is not None and now - known.read_at_s < self.STATIC_TTL_S:
            return known
        directory = _group_dir(mount, path)
        limit = CpuLimits(version=version, group=path[:GROUP_CHARS])
        if directory is not None:
            limit_dir, quota, period = _tightest(directory, mount[0], version)
            rel = os.path.relpath(limit_dir, mount[0]) if quota else ""
            cpuset = _cpuset(self.mounts, groups, version)
            limit = _with(
                limit,
                limit_group=("/" if rel == "." else "/" + rel if rel else "")[:GROUP_CHARS],
                quota_cores=round(quota / period, 4) if quota and period else None,
                period_us=period,
                cpuset=cpuset,
                cpuset_cpus=count_cpus(cpuset) if cpuset else None,
            )
        if len(self._groups) >= 256:  # a bound: a host of thousands of groups
            self._groups.clear()
        group = self._groups[key] = _Group(directory, limit, now)
        return group


def read_cpu_limits(
    procfs: ProcFS, pid: int, mounts: CgroupMounts, nice: int = 0, policy: int = 0
) -> CpuLimits:
    """One process's ``CpuLimits``, read whole (no cache)."""
    return CpuLimitReader(procfs, mounts).read(pid, nice, policy)


def _with(base: CpuLimits, **fields: Any) -> CpuLimits:
    return msgspec.structs.replace(base, **fields)


def read_mounts(procfs: ProcFS) -> CgroupMounts:
    """diag's own cgroup mounts (once per capture); none when mountinfo is unreadable."""
    data = read_capped(os.path.join(str(procfs.root), "self", "mountinfo"), 1 << 20)
    return parse_mountinfo(data.decode("utf-8", "replace")) if data else CgroupMounts()


def parse_loadavg(text: str) -> Tuple[float, int]:
    """/proc/loadavg -> (1-minute load, tasks runnable now)."""
    words = text.split()
    try:
        return float(words[0]), int(words[3].partition("/")[0])
    except (IndexError, ValueError):
        return 0.0, 0


def read_host_load(procfs: ProcFS, cpus: int) -> HostLoad:
    """The host's CPU demand now: load and runnable tasks against ``cpus``, and CPU PSI."""
    load1, runnable = parse_loadavg(procfs.read_global("loadavg") or "")
    avg10, total_us = parse_pressure(procfs.read_global("pressure", "cpu") or "")
    return HostLoad(
        cpus=cpus,
        load1=load1,
        runnable=runnable,
        psi_some_avg10=avg10,
        psi_some_total_us=total_us,
    )
