"""What bounds a process's disk I/O: its cgroup's throttle per device (issue #37).

Why: a rank reading its shard through a device its container may read at 1 MiB/s shows a read
rate and an ETA, but not why it is slow - and the fix is the limit, not the storage. v1:
the ``blkio`` controller's ``blkio.throttle.read_bps_device`` / ``write_bps_device`` lines
(``MAJ:MIN BYTES``); v2: ``io.max`` (``MAJ:MIN rbps=N wbps=N riops=max wiops=max``). Only the
process's own group is read. Capped reads of kernel pseudo-files, failing alone (None).
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

from diag.model import IoLimit
from diag.probes.cgroup_cpu import _group_dir, controller_mounts, parse_proc_cgroup
from diag.probes.procfs import ProcFS, read_capped

MAX_FILE_BYTES = 4096
MAX_DEVICES = 16


class IoMounts(NamedTuple):
    blkio_v1: Optional[Tuple[str, str]] = None
    v2: Optional[Tuple[str, str]] = None


def parse_io_mounts(text: str) -> IoMounts:
    v1, v2 = controller_mounts(text, ("blkio",))
    return IoMounts(v1.get("blkio"), v2)


def parse_bps_device(text: str) -> Dict[str, int]:
    """v1 ``blkio.throttle.*_bps_device``: {"MAJ:MIN": bytes per second}."""
    out: Dict[str, int] = {}
    for line in text.splitlines()[:MAX_DEVICES]:
        words = line.split()
        if len(words) == 2 and words[1].isdigit() and ":" in words[0]:
            out[words[0]] = int(words[1])
    return out


def parse_io_max(text: str) -> Dict[str, Tuple[Optional[int], Optional[int]]]:
    """v2 ``io.max``: {"MAJ:MIN": (rbps, wbps)}, None for "max"."""
    out: Dict[str, Tuple[Optional[int], Optional[int]]] = {}
    for line in text.splitlines()[:MAX_DEVICES]:
        words = line.split()
        if not words or ":" not in words[0]:
            continue
        kv = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        rbps, wbps = kv.get("rbps", "max"), kv.get("wbps", "max")
        out[words[0]] = (
            int(rbps) if rbps.isdigit() else None,
            int(wbps) if wbps.isdigit() else None,
        )
    return out


def _read(directory: str, name: str) -> str:
    data = read_capped(os.path.join(directory, name), MAX_FILE_BYTES)
    return "" if data is None else data.decode("utf-8", "replace")


_MAX_GROUPS = 256  # groups kept at once (a host of many containers)


class IoLimitReader:
    """Reads each process's I/O throttles; the mounts once, a group's throttles once per
    ``STATIC_TTL_S`` (settings, like a CPU limit: ``cgroup_cpu.CpuLimitReader``; the ranks
    of a job share a group, and reading it again was ~0.3 ms of each rank's read)."""

    STATIC_TTL_S = 30.0

    def __init__(self, procfs: ProcFS, mounts: Optional[IoMounts] = None) -> None:
        self.procfs = procfs
        if mounts is None:
            data = read_capped(os.path.join(str(procfs.root), "self", "mountinfo"), 1 << 20)
            mounts = parse_io_mounts(data.decode("utf-8", "replace")) if data else IoMounts()
        self.mounts = mounts
        self._groups: Dict[Tuple[str, str], Tuple[float, Optional[Tuple[IoLimit, ...]]]] = {}

    def read(self, pid: int) -> Optional[Tuple[IoLimit, ...]]:
        """Its group's throttles, () where none is set; None when unreadable."""
        text = read_capped(os.path.join(str(self.procfs.root), str(pid), "cgroup"), 4096)
        if text is None:
            return None
        groups = parse_proc_cgroup(text.decode("utf-8", "replace"))
        if "blkio" in groups and self.mounts.blkio_v1 is not None:
            key = ("v1", groups["blkio"])
        elif "" in groups and self.mounts.v2 is not None:
            key = ("v2", groups[""])
        else:
            return ()
        now = time.monotonic()
        known = self._groups.get(key)
        if known is not None and now - known[0] < self.STATIC_TTL_S:
            return known[1]
        found = self._read_group(*key)
        if len(self._groups) >= _MAX_GROUPS:
            self._groups.clear()
        self._groups[key] = (now, found)
        return found

    def _read_group(self, version: str, path: str) -> Optional[Tuple[IoLimit, ...]]:
        limits: Dict[str, Tuple[Optional[int], Optional[int]]] = {}
        if version == "v1" and self.mounts.blkio_v1 is not None:
            d = _group_dir(self.mounts.blkio_v1, path)
            if d is None:
                return None
            reads = parse_bps_device(_read(d, "blkio.throttle.read_bps_device"))
            writes = parse_bps_device(_read(d, "blkio.throttle.write_bps_device"))
            for dev in sorted(set(reads) | set(writes)):
                limits[dev] = (reads.get(dev), writes.get(dev))
        elif self.mounts.v2 is not None:
            d = _group_dir(self.mounts.v2, path)
            if d is None:
                return None
            limits = parse_io_max(_read(d, "io.max"))
        out: List[IoLimit] = [
            IoLimit(device=dev, read_bps=r, write_bps=w)
            for dev, (r, w) in sorted(limits.items())
            if r is not None or w is not None
        ]
        return tuple(out[:MAX_DEVICES])
