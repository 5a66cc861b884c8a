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

import errno
import socket
import struct
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLMSG_DONE = 3
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
TCP_LISTEN_STATE = 10
TCP_ESTABLISHED_STATE = 1
TCP_CLOSE_WAIT_STATE = 8
TCP_TIME_WAIT_STATE = 6
# Linux keeps a closed connection in TIME_WAIT for TCP_TIMEWAIT_LEN, a constant (60 s): a
# TIME_WAIT socket's age is that less its timer's ``expires``.
TIME_WAIT_MS = 60_000
INET_DIAG_INFO = 2  # rtattr type of struct tcp_info
# struct tcp_info (linux/tcp.h): the offsets of the fields read, and the length they need.
_TI_PROBES = 3  # u8 tcpi_probes: zero-window (or keepalive) probes unanswered in a row
_TI_BACKOFF = 4  # u8 tcpi_backoff: retransmission timeouts in a row (the RTO doubles each)
_TI_UNACKED = 24  # u32 tcpi_unacked: segments sent and not yet acknowledged
_TI_LAST_DATA_SENT = 44
_TI_LAST_DATA_RECV = 52
_TI_LAST_ACK_RECV = 56
_TI_TOTAL_RETRANS = 100  # u32 tcpi_total_retrans: segments retransmitted over its life
_TI_BYTES_ACKED = 120
_TI_BYTES_RECEIVED = 128
_TI_NEEDED = 136
MAX_CONNECTIONS = 65536  # a dump past this many sockets stops recording (a busy proxy host)

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
# inet_diag_msg: family, state, timer, retrans; sockid (sport, dport big-endian, src[16],
# dst[16], if, cookie[2]); expires, rqueue, wqueue, uid, inode.
_MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
_REQ = struct.Struct("=BBBBI48s")  # inet_diag_req_v2: family, protocol, ext, pad, states, id


class TcpConn(NamedTuple):
    """One connected TCP socket, as the kernel keeps it (``tcp_info`` when it was asked for)."""

    local: str  # "addr:port"
    local_port: int
    remote: str
    rqueue_bytes: int  # received, not yet read by the process
    bytes_in: Optional[int] = None  # tcpi_bytes_received
    bytes_out: Optional[int] = None  # tcpi_bytes_acked
    recv_age_ms: Optional[int] = None  # tcpi_last_data_recv: ms since data last arrived
    send_age_ms: Optional[int] = None  # tcpi_last_data_sent
    # Delivery: is the other end's kernel acknowledging? (a dead host or link: no)
    unacked_segs: Optional[int] = None  # tcpi_unacked
    retrans_total: Optional[int] = None  # tcpi_total_retrans
    rto_backoffs: Optional[int] = None  # tcpi_backoff
    probes_out: Optional[int] = None  # tcpi_probes
    ack_age_ms: Optional[int] = None  # tcpi_last_ack_recv: ms since the peer last acknowledged


class Closed(NamedTuple):
    """Connections of one local port in TIME_WAIT: this side closed them within the last 60 s.
    A server that closes each connection after its answer (HTTP/1.0, ``Connection: close``)
    leaves one per request on its listening port. Only the side that closes first is left in
    TIME_WAIT, so a client that gave up on a stuck server leaves it on the client's side, never
    on the server's port. Nothing else shows a request that came and went between two
    samples."""

    sockets: int
    youngest_age_ms: int
    oldest_age_ms: int


class TcpTable(NamedTuple):
    listen: Dict[int, int]  # {inode: port}
    conns: Dict[int, TcpConn]  # {inode: connection}, established or half-closed
    # {local port: its TIME_WAIT sockets}
    closed: Dict[int, Closed] = {}


def dump_request(family: int, seq: int = 1, states: int = 1 << TCP_LISTEN_STATE) -> bytes:
    """One SOCK_DIAG_BY_FAMILY dump request for the TCP sockets of ``family`` in ``states``
    (a bit mask; LISTEN alone by default); connected states also ask for ``tcp_info``."""
    listen_only = states == 1 << TCP_LISTEN_STATE
    ext = 0 if listen_only else 1 << (INET_DIAG_INFO - 1)
    body = _REQ.pack(family, socket.IPPROTO_TCP, ext, 0, states, b"")
    flags = _NLM_F_REQUEST | _NLM_F_DUMP
    return _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body


def _endpoint(family: int, raw: bytes, port: bytes) -> str:
    if family == socket.AF_INET:
        addr = socket.inet_ntop(socket.AF_INET, raw[:4])
    else:
        addr = "[" + socket.inet_ntop(socket.AF_INET6, raw[:16]) + "]"
    return f"{addr}:{int.from_bytes(port, 'big')}"


def _attrs(data: bytes, start: int, end: int) -> Iterator[Tuple[int, bytes]]:
    """(kind, payload) of each rtattr in data[start:end]; stops at a malformed one."""
    while start + 4 <= end:
        length, kind = struct.unpack_from("=HH", data, start)
        if length < 4 or start + length > end:
            return
        yield kind, data[start + 4 : start + length]
        start += (length + 3) & ~3


def _tcp_info(data: bytes, start: int, end: int) -> Optional[bytes]:
    """The INET_DIAG_INFO attribute's payload among the rtattrs in data[start:end]."""
    return next(
        (payload for kind, payload in _attrs(data, start, end) if kind == INET_DIAG_INFO), None
    )


def _messages(data: bytes, what: str) -> Tuple[List[Tuple[int, int]], bool]:
    """The (body offset, end) of each SOCK_DIAG_BY_FAMILY message of one datagram, and
    whether the dump is done (NLMSG_DONE seen).

    Raises OSError for an error message (the kernel's errno), ValueError for a truncated one.
    """
    out: List[Tuple[int, int]] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            raise ValueError(f"truncated netlink message ({length} bytes at {offset})")
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            (errno_neg,) = struct.unpack_from("=i", data, offset + _HEADER.size)
            raise OSError(-errno_neg, f"sock_diag refused the {what}")
        if kind == SOCK_DIAG_BY_FAMILY:
            out.append((offset + _HEADER.size, offset + length))
        offset += (length + 3) & ~3
    return out, False


def _conn(family: int, fields: tuple, info: Optional[bytes]) -> TcpConn:  # type: ignore[type-arg]
    sport, dport, src, dst = fields[4], fields[5], fields[6], fields[7]
    conn = TcpConn(
        local=_endpoint(family, src, sport),
        local_port=int.from_bytes(sport, "big"),
        remote=_endpoint(family, dst, dport),
        rqueue_bytes=fields[11],
    )
    if info is None or len(info) < _TI_NEEDED:
        return conn
    return conn._replace(
        bytes_out=struct.unpack_from("=Q", info, _TI_BYTES_ACKED)[0],
        bytes_in=struct.unpack_from("=Q", info, _TI_BYTES_RECEIVED)[0],
        send_age_ms=struct.unpack_from("=I", info, _TI_LAST_DATA_SENT)[0],
        recv_age_ms=struct.unpack_from("=I", info, _TI_LAST_DATA_RECV)[0],
        unacked_segs=struct.unpack_from("=I", info, _TI_UNACKED)[0],
        retrans_total=struct.unpack_from("=I", info, _TI_TOTAL_RETRANS)[0],
        rto_backoffs=info[_TI_BACKOFF],
        probes_out=info[_TI_PROBES],
        ack_age_ms=struct.unpack_from("=I", info, _TI_LAST_ACK_RECV)[0],
    )


def _tally_closed(closed: Dict[int, Closed], fields: tuple) -> None:  # type: ignore[type-arg]
    age_ms = max(0, TIME_WAIT_MS - fields[10])
    port = int.from_bytes(fields[4], "big")
    old = closed.get(port)
    if old is None:
        closed[port] = Closed(1, age_ms, age_ms)
    else:
        young, aged = min(old.youngest_age_ms, age_ms), max(old.oldest_age_ms, age_ms)
        closed[port] = Closed(old.sockets + 1, young, aged)


def parse_dump(
    data: bytes,
    into: Dict[int, int],
    conns: Optional[Dict[int, TcpConn]] = None,
    closed: Optional[Dict[int, Closed]] = None,
) -> bool:
    """Add one datagram's LISTEN sockets to ``into`` ({inode: port}), its connected ones to
    ``conns`` and its TIME_WAIT ones to ``closed``; True once the dump is done.

    Raises OSError for an error message (the kernel's errno), ValueError for a truncated one.
    """
    messages, done = _messages(data, "dump")
    for body, end in messages:
        if end - body < _MSG.size:
            continue
        fields = _MSG.unpack_from(data, body)
        family, state, sport, inode = fields[0], fields[1], fields[4], fields[-1]
        if state == TCP_LISTEN_STATE and inode:
            into[inode] = int.from_bytes(sport, "big")
        elif state == TCP_TIME_WAIT_STATE:
            if closed is not None and len(closed) < MAX_CONNECTIONS:
                _tally_closed(closed, fields)
        elif conns is not None and inode and len(conns) < MAX_CONNECTIONS:
            conns[inode] = _conn(family, fields, _tcp_info(data, body + _MSG.size, end))
    return done


def listening_sockets(timeout_s: float = 2.0) -> Dict[int, int]:
    """{socket inode: port} of every listening TCP socket (IPv4 and IPv6) of this namespace.

    Raises OSError when netlink sock_diag is unavailable (no module, seccomp, a timeout).
    """
    out: Dict[int, int] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        _dump_family(family, out, timeout_s)
    return out


def tcp_table(timeout_s: float = 2.0) -> TcpTable:
    """Listening sockets, connected ones (with ``tcp_info``) and TIME_WAIT ones (tallied by
    port) of this namespace, one dump per address family. Raises OSError when netlink
    sock_diag is unavailable."""
    table = TcpTable({}, {}, {})
    states = (
        (1 << TCP_LISTEN_STATE)
        | (1 << TCP_ESTABLISHED_STATE)
        | (1 << TCP_CLOSE_WAIT_STATE)
        | (1 << TCP_TIME_WAIT_STATE)
    )
    for family in (socket.AF_INET, socket.AF_INET6):
        _dump_family(family, table.listen, timeout_s, states, table.conns, table.closed)
    return table


def _dump_family(
    family: int,
    into: Dict[int, int],
    timeout_s: float,
    states: int = 1 << TCP_LISTEN_STATE,
    conns: Optional[Dict[int, TcpConn]] = None,
    closed: Optional[Dict[int, Closed]] = None,
) -> None:
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG
    ) as sock:
        sock.settimeout(timeout_s)
        sock.sendto(dump_request(family, states=states), (0, 0))
        while True:
            try:
                done = parse_dump(sock.recv(65536), into, conns, closed)
            except ValueError as exc:
                raise OSError(f"sock_diag: {exc}") from exc
            if done:
                return


# AF_UNIX (linux/unix_diag.h): unix_diag_req, unix_diag_msg and the attributes asked for.
UDIAG_SHOW_NAME = 0x1
UDIAG_SHOW_PEER = 0x4
UNIX_DIAG_NAME = 0
UNIX_DIAG_PEER = 2
_UNIX_REQ = struct.Struct("=BBHIII8s")  # family, protocol, pad, states, ino, show, cookie
_UNIX_MSG = struct.Struct("=BBBBI8s")  # family, type, state, pad, ino, cookie
MAX_UNIX_SOCKETS = 65536  # a dump past this many sockets stops recording (a Ray host: ~10k)
MAX_UNIX_PATH = 256  # characters of a bound path kept


class UnixSock(NamedTuple):
    """One AF_UNIX socket: the inode of its connected peer (None: not connected) and the path
    it is bound to ("@name" for an abstract one, "" when unbound)."""

    peer_inode: Optional[int]
    path: str = ""


def _unix_path(raw: bytes) -> str:
    if raw[:1] == b"\0":
        text = "@" + raw[1:].decode("utf-8", "replace")
    else:
        text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return text[:MAX_UNIX_PATH]


def parse_unix_dump(data: bytes, into: Dict[int, UnixSock]) -> bool:
    """Add one datagram's AF_UNIX sockets to ``into`` ({inode: UnixSock}); True once the dump
    is done. Raises OSError for an error message, ValueError for a truncated one."""
    messages, done = _messages(data, "unix dump")
    for body, end in messages:
        if end - body < _UNIX_MSG.size:
            continue
        inode = _UNIX_MSG.unpack_from(data, body)[4]
        if not inode or len(into) >= MAX_UNIX_SOCKETS:
            continue
        peer: Optional[int] = None
        path = ""
        for kind, payload in _attrs(data, body + _UNIX_MSG.size, end):
            if kind == UNIX_DIAG_PEER and len(payload) >= 4:
                peer = struct.unpack_from("=I", payload)[0] or None
            elif kind == UNIX_DIAG_NAME:
                path = _unix_path(payload)
        into[inode] = UnixSock(peer, path)
    return done


MAX_UNIX_QUERIES = 64  # sockets asked about one by one in a call (the blocked ones)


def unix_query(inode: int, seq: int = 1, show: int = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME) -> bytes:
    """A request for the one AF_UNIX socket ``inode`` (no cookie: any socket of that inode)."""
    body = _UNIX_REQ.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, inode, show, b"\xff" * 8)
    return (
        _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0) + body
    )


def unix_peers(inodes: Iterable[int], timeout_s: float = 2.0) -> Dict[int, UnixSock]:
    """{inode: UnixSock} of the given sockets that are AF_UNIX ones of this namespace (an
    inode that is not - a TCP, UDP or netlink socket - is left out), asked one by one: a full
    dump costs ~8 ms of parsing at 5,000 sockets (a Ray host has thousands), an exact query a
    lookup in the kernel. At most ``MAX_UNIX_QUERIES``.

    Raises OSError when netlink sock_diag is unavailable."""
    out: Dict[int, UnixSock] = {}
    wanted = sorted(set(inodes))[:MAX_UNIX_QUERIES]
    if not wanted:
        return out
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG
    ) as sock:
        sock.settimeout(timeout_s)
        for seq, inode in enumerate(wanted, 1):
            sock.sendto(unix_query(inode, seq), (0, 0))
            data = sock.recv(65536)
            found: Dict[int, UnixSock] = {}
            try:
                parse_unix_dump(data, found)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ESTALE):
                    continue  # no AF_UNIX socket of that inode here
                raise
            except ValueError as exc:
                raise OSError(f"sock_diag: {exc}") from exc
            if inode in found:
                out[inode] = found[inode]
    return out
