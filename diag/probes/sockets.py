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
from typing import Dict, Iterable, Mapping, NamedTuple, Optional, Set, Tuple

from diag.model import ClosedConns, ServedConn, TcpDelivery
from diag.probes.fd_ends import FdLinks, read_fd_links
from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import TcpConn, TcpTable, tcp_table

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


def inodes_of_links(links: FdLinks) -> Set[int]:
    """The socket inodes among one readlink pass's links."""
    inodes: Set[int] = set()
    for _, link in links.links:
        match = _SOCKET_LINK.match(link)
        if match:
            inodes.add(int(match.group(1)))
    return inodes


def listen_table(procfs: ProcFS, pid: int) -> Dict[int, int]:
    """Listening TCP ports (v4 and v6) of the network namespace of ``pid``: inode -> port."""
    table: Dict[int, int] = {}
    for name in ("tcp", "tcp6"):
        text = procfs.try_read_text(pid, "net", name)
        if text:
            table.update(parse_net_tcp(text))
    return table


MAX_SERVED = 64  # client connections recorded per process (a busy server holds thousands)


def _own_table(procfs: ProcFS) -> Optional[TcpTable]:
    """The TCP sockets of diag's own namespace by netlink; None: read /proc instead (a
    recorded /proc tree in tests, or a kernel without sock_diag)."""
    if not procfs.live:
        return None
    try:
        return tcp_table()
    except OSError:
        return None


class SocketView(NamedTuple):
    """What one sample learns of a process's TCP sockets. ``links``: its readlink pass over
    /proc/P/fd, which ``diag.probes.fd_ends`` matches again (the fd directory is walked once);
    ``tcp``: its TCP sockets, {inode: (local, remote)} ("" for a listener's remote), known in
    diag's own network namespace (``own_netns``)."""

    ports: Tuple[int, ...]
    served: Tuple[ServedConn, ...] = ()
    served_more: int = 0
    links: FdLinks = FdLinks()
    tcp: Mapping[int, Tuple[str, str]] = {}
    own_netns: bool = False
    # {its socket inode: the inode of the other end on this host} - the accepted socket of a
    # local server, or its listener while the connection waits in the accept queue - so a
    # client's wait can be followed to the server's process, in the job or not.
    tcp_peers: Mapping[int, int] = {}
    # Connections to its listening ports closed in the last 60 s (TIME_WAIT), by port.
    closed: Tuple[ClosedConns, ...] = ()
    # {its connected TCP socket inode: a reply is owed to it} (``owed``), where tcp_info says.
    owed: Mapping[int, bool] = {}
    # {its connected TCP socket inode: ms since data last sent, last received} (tcp_info).
    data_ages_ms: Mapping[int, Tuple[int, int, int]] = {}  # ... and bytes received
    # {its connected TCP socket inode: delivery} where data is in flight or probed (``delivery``).
    delivery: Mapping[int, TcpDelivery] = {}


_LOOPBACK = ("127.", "[::1]", "::1", "[::ffff:127.")


def _host_of(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


class TcpPeers(NamedTuple):
    """One network namespace's sockets indexed for finding a connection's other end."""

    by_pair: Dict[Tuple[str, str], int]  # (local, remote) -> inode
    listeners: Dict[int, int]  # port -> a listener's inode


def tcp_peer_index(table: TcpTable) -> TcpPeers:
    """Built once per table and sample (a host may hold 100k connections)."""
    listeners: Dict[int, int] = {}
    for inode, port in sorted(table.listen.items()):
        listeners.setdefault(port, inode)
    return TcpPeers({(c.local, c.remote): i for i, c in table.conns.items()}, listeners)


def tcp_peer_inodes(
    table: TcpTable, inodes: Iterable[int], index: Optional[TcpPeers] = None
) -> Dict[int, int]:
    """{inode: the other end's inode} for the connected sockets among ``inodes`` whose other
    end is a socket of this network namespace: the reverse 4-tuple, else (not accepted yet, or
    accepted by no one: a stopped server) the listener on the remote port when the remote
    address is this host's (loopback, or the connection's own local address)."""
    by_pair, listeners = index or tcp_peer_index(table)
    out: Dict[int, int] = {}
    for inode in inodes:
        c = table.conns.get(inode)
        if c is None:
            continue
        peer = by_pair.get((c.remote, c.local))
        if peer is None:
            host, _, port_text = c.remote.rpartition(":")
            local_host = host.startswith(_LOOPBACK) or host == _host_of(c.local)
            peer = listeners.get(int(port_text)) if port_text.isdigit() and local_host else None
        if peer:
            out[inode] = peer
    return out


def _served(
    table: TcpTable, inodes: Set[int], ports: Tuple[int, ...], job_endpoints: Set[str]
) -> Tuple[Tuple[ServedConn, ...], int]:
    conns = [
        (inode, table.conns[inode])
        for inode in sorted(inodes)
        if inode in table.conns and table.conns[inode].local_port in ports
    ]
    out = [
        ServedConn(
            port=c.local_port,
            remote=c.remote,
            inode=inode,
            bytes_in=c.bytes_in or 0,
            bytes_out=c.bytes_out or 0,
            recv_age_ms=c.recv_age_ms or 0,
            send_age_ms=c.send_age_ms or 0,
            rqueue_bytes=c.rqueue_bytes,
            internal=c.remote in job_endpoints,
        )
        for inode, c in conns[:MAX_SERVED]
        if c.bytes_in is not None
    ]
    return tuple(out), max(0, len(conns) - MAX_SERVED)


def owed_reply(c: TcpConn) -> Optional[bool]:
    """A reply is owed on this connection: this side sent data after the last it received (a
    request outstanding); False when it sent nothing or its last data came in; None without
    tcp_info."""
    if c.bytes_out is None or c.send_age_ms is None or c.recv_age_ms is None:
        return None
    if c.bytes_out <= 1 and not c.unacked_segs:
        # tcpi_bytes_acked counts the SYN: nothing of its own was sent - unless what it sent
        # is still unacknowledged (a peer that acknowledges nothing: a dead host)
        return False
    return not c.bytes_in or c.send_age_ms < c.recv_age_ms


def delivery(c: TcpConn) -> Optional[TcpDelivery]:
    """Its delivery where something is in flight or probed (a quiet link records nothing);
    None without tcp_info."""
    if c.unacked_segs is None or c.retrans_total is None or c.ack_age_ms is None:
        return None
    if not (c.unacked_segs or c.rto_backoffs or c.probes_out):
        return None
    return TcpDelivery(
        unacked_segs=c.unacked_segs,
        retrans_total=c.retrans_total,
        rto_backoffs=c.rto_backoffs or 0,
        probes_out=c.probes_out or 0,
        ack_age_ms=c.ack_age_ms,
    )


def listen_ports(procfs: ProcFS, pids: Iterable[int]) -> Dict[int, Tuple[int, ...]]:
    """{pid: sorted listening ports}; pids with none (or unreadable fds) map to ()."""
    return {pid: view.ports for pid, view in socket_views(procfs, pids).items()}


def socket_views(procfs: ProcFS, pids: Iterable[int]) -> Dict[int, SocketView]:
    """{pid: listening ports and the client connections to them}. Connections are known in
    diag's own network namespace (netlink tcp_info); elsewhere only the ports are read."""
    tables: Dict[str, Tuple[Dict[int, int], Optional[TcpTable]]] = {}
    ours = procfs.readlink(os.getpid(), "ns", "net") if procfs.live else None
    inodes_of: Dict[int, Set[int]] = {}
    links_of: Dict[int, FdLinks] = {}
    netns_of: Dict[int, str] = {}
    for pid in pids:
        netns = procfs.readlink(pid, "ns", "net") or f"pid:{pid}"
        netns_of[pid] = netns
        if netns not in tables:
            own = _own_table(procfs) if netns == ours else None
            tables[netns] = (
                (own.listen, own) if own is not None else (listen_table(procfs, pid), None)
            )
        links_of[pid] = read_fd_links(procfs, pid)
        inodes_of[pid] = inodes_of_links(links_of[pid])
    # The job's own local endpoints: a connection from one of them is an RPC between the
    # job's processes (Ray's gRPC, a front end to its engine), not a client of the job.
    job_endpoints: Set[str] = set()
    for pid, inodes in inodes_of.items():
        full = tables[netns_of[pid]][1]
        if full is not None:
            job_endpoints.update(full.conns[i].local for i in inodes if i in full.conns)
    out: Dict[int, SocketView] = {}
    peer_index: Dict[str, TcpPeers] = {}
    for pid, inodes in inodes_of.items():
        listen, full = tables[netns_of[pid]]
        ports = tuple(sorted({listen[i] for i in inodes if i in listen}))
        links = links_of[pid]
        if full is None:
            out[pid] = SocketView(ports, links=links)
            continue
        tcp = {i: (full.conns[i].local, full.conns[i].remote) for i in inodes if i in full.conns}
        tcp.update({i: (f"*:{listen[i]}", "") for i in inodes if i in listen})
        peers: Dict[int, int] = {}
        if any(i in full.conns for i in inodes):  # it holds a connection: index once
            key = netns_of[pid]
            if key not in peer_index:
                peer_index[key] = tcp_peer_index(full)
            peers = tcp_peer_inodes(full, inodes, peer_index[key])
        owed = {
            i: o for i in inodes if i in full.conns and (o := owed_reply(full.conns[i])) is not None
        }
        ages = {
            i: (conn.send_age_ms, conn.recv_age_ms, conn.bytes_in or 0)
            for i in inodes
            if (conn := full.conns.get(i)) is not None
            and conn.send_age_ms is not None
            and conn.recv_age_ms is not None
        }
        sent = {i: d for i in inodes if i in full.conns and (d := delivery(full.conns[i]))}
        view = SocketView(
            ports, links=links, tcp=tcp, own_netns=True, tcp_peers=peers, owed=owed,
            data_ages_ms=ages, delivery=sent,
        )  # fmt: skip
        if ports:
            served, more = _served(full, inodes, ports, job_endpoints)
            closed = tuple(
                ClosedConns(port=port, count=c.sockets, youngest_age_ms=c.youngest_age_ms,
                            oldest_age_ms=c.oldest_age_ms)
                for port in ports
                if (c := full.closed.get(port)) is not None
            )  # fmt: skip
            view = view._replace(served=served, served_more=more, closed=closed)
        out[pid] = view
    return out
