"""Listening sockets by netlink sock_diag: the same answer as /proc/net/tcp{,6}, for less."""

from __future__ import annotations

import errno
import os
import socket
import struct
from pathlib import Path
from typing import Iterator

import pytest

from diag.probes import sockets
from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import (
    NLMSG_DONE,
    NLMSG_ERROR,
    SOCK_DIAG_BY_FAMILY,
    TCP_LISTEN_STATE,
    listening_sockets,
    parse_dump,
)
from diag.probes.sockets import listen_ports, listen_table


def _message(kind: int, body: bytes) -> bytes:
    length = 16 + len(body)
    padded = body + b"\0" * (-length % 4)
    return struct.pack("=IHHII", length, kind, 0, 1, 0) + padded


def _diag_msg(state: int, port: int, inode: int) -> bytes:
    sockid = port.to_bytes(2, "big") + b"\0\0" + b"\0" * 32 + b"\0" * 4 + b"\0" * 8
    return (
        struct.pack("=BBBB", socket.AF_INET, state, 0, 0)
        + sockid
        + struct.pack("=IIIII", 0, 0, 0, 0, inode)
    )


def test_parse_dump_reads_listeners_until_done() -> None:
    data = (
        _message(SOCK_DIAG_BY_FAMILY, _diag_msg(TCP_LISTEN_STATE, 8080, 111))
        + _message(SOCK_DIAG_BY_FAMILY, _diag_msg(1, 9999, 222))  # established: not kept
        + _message(SOCK_DIAG_BY_FAMILY, _diag_msg(TCP_LISTEN_STATE, 443, 333))
    )
    into: dict[int, int] = {}
    assert parse_dump(data, into) is False  # more datagrams to come
    assert into == {111: 8080, 333: 443}
    assert parse_dump(_message(NLMSG_DONE, struct.pack("=i", 0)), into) is True


def test_parse_dump_raises_the_kernels_error_and_on_truncation() -> None:
    with pytest.raises(OSError) as refused:
        parse_dump(_message(NLMSG_ERROR, struct.pack("=i", -errno.ENOENT)), {})
    assert refused.value.errno == errno.ENOENT
    whole = _message(SOCK_DIAG_BY_FAMILY, _diag_msg(TCP_LISTEN_STATE, 1, 2))
    with pytest.raises(ValueError, match="truncated"):
        parse_dump(whole[:-8], {})


@pytest.fixture()
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    """An IPv4 and an IPv6 listener of this process, on ports the kernel picks."""
    v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    v4.bind(("127.0.0.1", 0))
    v4.listen()
    v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    v6.bind(("::1", 0))
    v6.listen()
    try:
        yield v4, v6
    finally:
        v4.close()
        v6.close()


def test_netlink_agrees_with_proc_net_tcp(listeners: tuple[socket.socket, ...]) -> None:
    # Two reads of a host's table, a moment apart: a socket another process opened or closed
    # in between differs (a fresh clone's suite once saw one). Agreement: within three tries.
    for _ in range(3):
        by_netlink = listening_sockets()
        by_proc = listen_table(ProcFS(), os.getpid())
        if by_netlink == by_proc:
            break
    assert by_netlink == by_proc
    ports = {s.getsockname()[1] for s in listeners}
    assert ports <= set(by_netlink.values())


def test_listen_ports_same_with_and_without_netlink(
    listeners: tuple[socket.socket, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    procfs = ProcFS()
    ours = listen_ports(procfs, [os.getpid()])
    assert set(ours[os.getpid()]) == {s.getsockname()[1] for s in listeners}

    def refused(timeout_s: float = 2.0) -> dict[int, int]:
        raise OSError(errno.EPROTONOSUPPORT, "no sock_diag")

    monkeypatch.setattr(sockets, "tcp_table", refused)
    assert listen_ports(procfs, [os.getpid()]) == ours


def test_recorded_proc_tree_never_asks_netlink(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A recorded tree describes another machine: netlink would answer for this one."""

    def forbidden(timeout_s: float = 2.0) -> dict[int, int]:
        raise AssertionError("netlink asked for a recorded /proc tree")

    monkeypatch.setattr(sockets, "tcp_table", forbidden)
    recorded = ProcFS(Path(__file__).resolve().parent / "data" / "proc")
    assert listen_ports(recorded, [8964]) == {8964: (36371, 43623)}


def test_client_connections_carry_traffic_and_pending_requests() -> None:
    """A real listener in this process, a real client in another: the served connection
    shows its bytes both ways, and a request sent after the last answer reads as pending."""
    import subprocess
    import sys
    import time

    from diag.probes.sockets import socket_views

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client_code = (
        "import socket,sys,time\n"
        f"c=socket.create_connection(('127.0.0.1',{port}))\n"
        "c.sendall(b'x'*1000); c.recv(5000); time.sleep(0.1); c.sendall(b'GET')\n"
        "print('sent', flush=True)\n"
        "time.sleep(30)\n"
    )
    client = subprocess.Popen([sys.executable, "-c", client_code], stdout=subprocess.PIPE)
    try:
        conn, _ = server.accept()
        conn.recv(1000)
        conn.sendall(b"y" * 5000)
        assert client.stdout is not None and client.stdout.readline().startswith(b"sent")
        time.sleep(0.2)
        view = socket_views(ProcFS(), [os.getpid()])[os.getpid()]
        assert view.ports == (port,)
        (served,) = view.served
        assert served.port == port and not served.internal
        assert served.bytes_in == 1003 and served.bytes_out == 5000
        assert served.pending and served.rqueue_bytes == 3
        # Both ends in the job: an RPC between its own processes, not a client.
        both = socket_views(ProcFS(), [os.getpid(), client.pid])[os.getpid()]
        assert both.served[0].internal
        conn.close()
    finally:
        client.kill()
        client.wait()
        server.close()


def test_connections_the_server_closed_are_counted_on_its_port_not_the_clients() -> None:
    """Real sockets: three connections the server closes first after its answer stay in
    TIME_WAIT on its listening port (``SocketView.closed``: count and ages); connections the
    client closes first - a client giving up on a stuck server - leave nothing there."""
    import time

    from diag.probes.sockets import socket_views

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        for _ in range(3):
            client = socket.create_connection(("127.0.0.1", port))
            conn, _ = server.accept()
            conn.sendall(b"answer")
            conn.close()  # the server closes first: TIME_WAIT on :port
            client.recv(16)
            client.close()
        time.sleep(0.05)
        (closed,) = socket_views(ProcFS(), [os.getpid()])[os.getpid()].closed
        assert (closed.port, closed.count) == (port, 3)
        assert 0 <= closed.youngest_age_ms <= closed.oldest_age_ms < 10_000
        for _ in range(2):
            client = socket.create_connection(("127.0.0.1", port))
            conn, _ = server.accept()
            client.close()  # the client closes first: TIME_WAIT on its own side
            time.sleep(0.02)
            conn.close()
        (again,) = socket_views(ProcFS(), [os.getpid()])[os.getpid()].closed
        assert again.count == 3
    finally:
        server.close()


def test_tcp_info_delivery_counters_are_read_where_linux_puts_them() -> None:
    """struct tcp_info (linux/tcp.h): probes u8 @3, backoff u8 @4, unacked u32 @24,
    last_ack_recv u32 @56, total_retrans u32 @100 - a dead link's marks; a quiet connection
    (nothing in flight, nothing probed) records no delivery."""
    from diag.probes.sock_diag import INET_DIAG_INFO, TCP_ESTABLISHED_STATE
    from diag.probes.sockets import delivery

    info = bytearray(136)
    info[3], info[4] = 0, 5
    struct.pack_into("=I", info, 24, 1)
    struct.pack_into("=I", info, 56, 12_764)
    struct.pack_into("=I", info, 100, 6)
    attr = struct.pack("=HH", 4 + len(info), INET_DIAG_INFO) + bytes(info)
    body = _diag_msg(TCP_ESTABLISHED_STATE, 40000, 77) + attr
    conns: dict = {}  # type: ignore[type-arg]
    parse_dump(_message(SOCK_DIAG_BY_FAMILY, body), {}, conns)
    c = conns[77]
    assert (c.unacked_segs, c.rto_backoffs, c.probes_out) == (1, 5, 0)
    assert (c.retrans_total, c.ack_age_ms) == (6, 12_764)
    got = delivery(c)
    assert got is not None and (got.unacked_segs, got.rto_backoffs, got.retrans_total) == (1, 5, 6)
    quiet = c._replace(unacked_segs=0, rto_backoffs=0, probes_out=0)
    assert delivery(quiet) is None
