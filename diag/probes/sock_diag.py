"""Listening TCP sockets of diag's own network namespace, asked of the kernel by netlink.

Reading /proc/net/tcp makes the kernel walk every bucket of the connection hash table to
print a table of one line: ~1.5 ms per file here, so ~3 ms of every sample's CPU, taken from
the workers reading the ranks (bench/snapshot.py). A NETLINK_SOCK_DIAG dump asking only for
LISTEN sockets walks the listening hash alone, as ``ss -tln`` does: ~30 us. It answers for the
namespace of the asking socket, so ``diag.probes.sockets`` uses it only for processes in
diag's own network namespace, and reads /proc/PID/net/tcp{,6} for the others or when the
kernel has no sock_diag (``OSError``).

Message layouts: linux/netlink.h (nlmsghdr), linux/inet_diag.h (inet_diag_req_v2,
inet_diag_msg).
"""

from __future__ import annotations

import socket
import struct
from typing import Dict

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLMSG_DONE = 3
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
TCP_LISTEN_STATE = 10

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
# inet_diag_msg: family, state, timer, retrans; sockid (sport, dport big-endian, src[16],
# dst[16], if, cookie[2]); expires, rqueue, wqueue, uid, inode.
_MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
_REQ = struct.Struct("=BBBBI48s")  # inet_diag_req_v2: family, protocol, ext, pad, states, id


def dump_request(family: int, seq: int = 1) -> bytes:
    """One SOCK_DIAG_BY_FAMILY dump request for the TCP sockets of ``family`` in LISTEN."""
    body = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN_STATE, b"")
    flags = _NLM_F_REQUEST | _NLM_F_DUMP
    return _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body


def parse_dump(data: bytes, into: Dict[int, int]) -> bool:
    """Add one datagram's LISTEN sockets to ``into`` ({inode: port}); True once the dump is done.

    Raises OSError for an error message (the kernel's errno), ValueError for a truncated one.
    """
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            raise ValueError(f"truncated netlink message ({length} bytes at {offset})")
        if kind == NLMSG_DONE:
            return True
        if kind == NLMSG_ERROR:
            (errno_neg,) = struct.unpack_from("=i", data, offset + _HEADER.size)
            raise OSError(-errno_neg, "sock_diag refused the dump")
        if kind == SOCK_DIAG_BY_FAMILY and length >= _HEADER.size + _MSG.size:
            fields = _MSG.unpack_from(data, offset + _HEADER.size)
            state, sport, inode = fields[1], fields[4], fields[-1]
            if state == TCP_LISTEN_STATE and inode:
                into[inode] = int.from_bytes(sport, "big")
        offset += (length + 3) & ~3
    return False


def listening_sockets(timeout_s: float = 2.0) -> Dict[int, int]:
    """{socket inode: port} of every listening TCP socket (IPv4 and IPv6) of this namespace.

    Raises OSError when netlink sock_diag is unavailable (no module, seccomp, a timeout).
    """
    out: Dict[int, int] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        _dump_family(family, out, timeout_s)
    return out


def _dump_family(family: int, into: Dict[int, int], timeout_s: float) -> None:
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG
    ) as sock:
        sock.settimeout(timeout_s)
        sock.sendto(dump_request(family), (0, 0))
        while True:
            try:
                done = parse_dump(sock.recv(65536), into)
            except ValueError as exc:
                raise OSError(f"sock_diag: {exc}") from exc
            if done:
                return
