"""Listening TCP ports per process: a server that listens is "ready", not deadlocked.

/proc/net/tcp{,6} lists every socket of a network namespace with its inode; /proc/P/fd links
``socket:[INODE]`` tie them to processes. The table is read once per network namespace: for
diag's own, from the kernel by netlink (``diag.probes.sock_diag``: /proc/net/tcp costs ~1.5 ms
of kernel time per file however few sockets there are); for another (a container), or when
netlink is refused, from /proc/P/net/ so the process is matched against its own table.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import listening_sockets

TCP_LISTEN = "0A"
_SOCKET_LINK = re.compile(r"^socket:\[(\d+)\]$")


def parse_net_tcp(text: str) -> Dict[int, int]:
    """LISTEN rows of /proc/net/tcp or tcp6 as {socket inode: local port}."""
    out: Dict[int, int] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN:
            continue
        _, _, port_hex = fields[1].rpartition(":")
        try:
            out[int(fields[9])] = int(port_hex, 16)
        except ValueError:
            continue
    return out


def socket_inodes(procfs: ProcFS, pid: int) -> Set[int]:
    inodes: Set[int] = set()
    for fd in procfs.fds(pid):
        link = procfs.readlink(pid, "fd", str(fd))
        match = _SOCKET_LINK.match(link or "")
        if match:
            inodes.add(int(match.group(1)))
    return inodes


def _listen_table(procfs: ProcFS, pid: int) -> Dict[int, int]:
    table: Dict[int, int] = {}
    for name in ("tcp", "tcp6"):
        text = procfs.try_read_text(pid, "net", name)
        if text:
            table.update(parse_net_tcp(text))
    return table


def _own_table(procfs: ProcFS) -> Optional[Dict[int, int]]:
    """The listening sockets of diag's own namespace by netlink; None: read /proc instead
    (a recorded /proc tree in tests, or a kernel without sock_diag)."""
    if not procfs.live:
        return None
    try:
        return listening_sockets()
    except OSError:
        return None


def listen_ports(procfs: ProcFS, pids: Iterable[int]) -> Dict[int, Tuple[int, ...]]:
    """{pid: sorted listening ports}; pids with none (or unreadable fds) map to ()."""
    tables: Dict[str, Dict[int, int]] = {}
    ours = procfs.readlink(os.getpid(), "ns", "net") if procfs.live else None
    out: Dict[int, Tuple[int, ...]] = {}
    for pid in pids:
        netns = procfs.readlink(pid, "ns", "net") or f"pid:{pid}"
        if netns not in tables:
            own = _own_table(procfs) if netns == ours else None
            tables[netns] = own if own is not None else _listen_table(procfs, pid)
        table = tables[netns]
        ports: List[int] = sorted({table[i] for i in socket_inodes(procfs, pid) if i in table})
        out[pid] = tuple(ports)
    return out
