"""Filesystem waits and their owners: the mount a blocked thread's file lies on, and for a FUSE
mount served on this host, the daemon that serves it.

A thread in D state, or asleep in a filesystem's wait (``request_wait_answer`` for FUSE, the
NFS/RPC waits), waits on that filesystem - not on its peers. On a FUSE mount (gcsfuse,
mountpoint-s3, JuiceFS, a user's own) the request goes to the daemon holding ``/dev/fuse``
for it: the daemon is who can end the wait. The mount comes from ``/proc/PID/mountinfo`` (the
waiting process's own mount namespace) and the file from the thread's blocked fd; the daemon
is the process whose ``/dev/fuse`` fd reports the mount's connection
(``/proc/PID/fdinfo/N`` ``fuse_connection:`` equals the mount's device minor).

Read only when a thread of the job sleeps in such a wait (the collector decides), and bounded:
``MAX_MOUNTINFO_BYTES`` of mountinfo, ``SCAN_PID_BUDGET`` processes and ``SCAN_TIME_BUDGET_S``
for the daemon scan, ``MAX_WAITS`` records. The file itself is never opened or stat'ed (it
may sit on the very mount that hangs).

``parse_mountinfo``, ``mount_of`` and ``fs_kind`` are pure; ``job_fs_waits`` is the thin I/O
through the ``ProcFS`` handed in.
"""

from __future__ import annotations

import re
import time
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from diag.model import FsWait
from diag.probes.fd_ends import MAX_FDS
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_name_state
from diag.vocab import FsKind

MAX_MOUNTINFO_BYTES = 512 * 1024  # a container host with thousands of mounts stays under this
MAX_MOUNTS = 20_000
MAX_WAITS = 16  # records per sample
MAX_PATH = 256  # characters of a path kept
SCAN_PID_BUDGET = 4096  # processes looked at for /dev/fuse holders
SCAN_TIME_BUDGET_S = 0.5

NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p", "afs",
     "gpfs", "beegfs", "orangefs", "davfs", "sshfs"}
)  # fmt: skip
# Wait channels of a sleeping thread inside a filesystem that answers over a wire.
_FS_WCHANS = (
    "request_wait_answer",
    "fuse_",
    "nfs_",
    "nfs4_",
    "rpc_wait",
    "__rpc_",
    "ceph_",
    "cifs_",
    "wait_for_response",
    "p9_client_rpc",
)
_OCTAL = re.compile(r"\\([0-7]{3})")


class MountEntry(NamedTuple):
    """One line of /proc/PID/mountinfo, the fields diag needs."""

    dev_major: int
    dev_minor: int
    mount_point: str
    fstype: str
    source: str


def _unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str, max_entries: int = MAX_MOUNTS) -> List[MountEntry]:
    """``36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`` -> entries, in file
    order (a later mount on the same point shadows an earlier one). Bad lines are skipped."""
    out: List[MountEntry] = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        major, _, minor = fields[2].partition(":")
        if not (major.isdigit() and minor.isdigit()):
            continue
        out.append(
            MountEntry(int(major), int(minor), _unescape(fields[4]), rest[0], _unescape(rest[1]))
        )
        if len(out) >= max_entries:
            break
    return out


def mount_of(path: str, mounts: Sequence[MountEntry]) -> Optional[MountEntry]:
    """The mount ``path`` lies on: the longest mount point that contains it, the last such."""
    best: Optional[MountEntry] = None
    for m in mounts:
        point = m.mount_point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = m
    return best


def fs_kind(fstype: str) -> FsKind:
    """``fuse`` (fuse, fuse.gcsfuse, fuseblk), ``network`` (nfs, cifs, ceph...), ``local``."""
    if fstype == "fuse" or fstype.startswith(("fuse.", "fuseblk")):
        return "fuse"
    base = fstype.split(".", 1)[0]
    return "network" if base in NETWORK_FS else "local"


def waits_on_filesystem(state: str, wchan: Optional[str]) -> bool:
    """A thread in D state, or asleep in a wire filesystem's wait channel."""
    if state == "D":
        return True
    return state == "S" and bool(wchan) and str(wchan).startswith(_FS_WCHANS)


def _read_mountinfo(procfs: ProcFS, pid: int) -> str:
    with open(procfs.path(pid, "mountinfo"), "rb") as fh:
        data = fh.read(MAX_MOUNTINFO_BYTES)
    return data.decode("utf-8", "replace")


def _fuse_connection(procfs: ProcFS, pid: int, fd: int) -> Optional[int]:
    text = procfs.try_read_text(pid, "fdinfo", str(fd)) or ""
    m = re.search(r"^fuse_connection:\s*(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def fuse_daemons(
    procfs: ProcFS,
    connections: Set[int],
    pid_budget: int = SCAN_PID_BUDGET,
    time_budget_s: float = SCAN_TIME_BUDGET_S,
) -> Tuple[Dict[int, Tuple[int, str, str]], str]:
    """connection -> (pid, comm, state) of the process holding /dev/fuse for it; and a note
    when the scan stopped short (budget spent)."""
    found: Dict[int, Tuple[int, str, str]] = {}
    deadline = time.monotonic() + time_budget_s
    pids = procfs.pids()
    for n, pid in enumerate(pids):
        if n >= pid_budget or time.monotonic() > deadline:
            return found, f"the /dev/fuse scan stopped after {n} of {len(pids)} processes"
        for fd in procfs.fds(pid)[:MAX_FDS]:  # a daemon opens /dev/fuse early: a low fd
            if procfs.readlink(pid, "fd", str(fd)) != "/dev/fuse":
                continue
            conn = _fuse_connection(procfs, pid, fd)
            if conn in connections and conn not in found:
                stat = procfs.try_read_text(pid, "stat") or ""
                name, state = parse_name_state(stat) if stat else ("", "?")
                found[conn] = (pid, name, state)
        if connections <= set(found):
            break
    return found, ""


def job_fs_waits(
    procfs: ProcFS, waiters: Mapping[int, Sequence[Tuple[int, Optional[int]]]]
) -> Tuple[Tuple[FsWait, ...], str]:
    """The filesystem waits of the job's threads (pid -> [(tid, blocked fd)]): each thread's
    file and mount, and for FUSE mounts the daemon. Local filesystems are left out (a disk)."""
    waits: List[Tuple[int, int, str, MountEntry]] = []
    for pid, threads in waiters.items():
        try:
            mounts = parse_mountinfo(_read_mountinfo(procfs, pid))
        except OSError:
            continue
        for tid, fd in threads:
            path = procfs.readlink(pid, "fd", str(fd)) if fd is not None else None
            if not path or not path.startswith("/"):
                continue
            mount = mount_of(path, mounts)
            if mount is not None and fs_kind(mount.fstype) != "local":
                waits.append((pid, tid, path, mount))
            if len(waits) >= MAX_WAITS:
                break
    conns = {
        m.dev_minor for _, _, _, m in waits if fs_kind(m.fstype) == "fuse" and m.dev_major == 0
    }
    daemons, note = fuse_daemons(procfs, conns) if conns else ({}, "")
    out = []
    for pid, tid, path, m in waits:
        kind = fs_kind(m.fstype)
        daemon = daemons.get(m.dev_minor) if kind == "fuse" and m.dev_major == 0 else None
        out.append(
            FsWait(
                pid=pid,
                tid=tid,
                path=path[:MAX_PATH],
                mount_point=m.mount_point[:MAX_PATH],
                fstype=m.fstype[:64],
                source=m.source[:MAX_PATH],
                kind=kind,
                daemon_pid=daemon[0] if daemon else None,
                daemon_name=daemon[1][:64] if daemon else "",
                daemon_state=daemon[2] if daemon else "?",
            )
        )
    return tuple(out), note
