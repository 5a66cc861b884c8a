"""deadlocked: a job sends a request to a service on another host and blocks in ``recv`` for
the answer - but that host has gone dark (powered off, a firewall now dropping its traffic, a
cut link): nothing the job sends is acknowledged. The kernel knows: the request's segments
stay unacknowledged, and the retransmission timeout backs off, doubling (tcp_info's
``tcpi_unacked``, ``tcpi_backoff``, ``tcpi_total_retrans``). The answer will never come; TCP
itself gives up only after ~15 min (``tcp_retries2``).

No iptables or nft here to drop packets: the service (double-forked, outside the job) attaches
a classic-BPF filter that drops every packet its accepted socket receives - the kernel's own
drop path (``tcp_filter``), so no ACK ever leaves it, as behind a firewall's DROP.

``run(stop=True)`` (tcp_peer_stopped.py): the contrast - the service's host is up but its
process is SIGSTOPped: the kernel acknowledges the request (nothing in flight), the process
never reads it. The job waits on a stopped process, not on a dead link.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import struct
import threading
import time

from _outside import serve_outside

SO_ATTACH_FILTER = 26
_KEEP = []  # the filter program must outlive the setsockopt call's reads


def drop_everything(sock: socket.socket) -> None:
    """Attach ``ret #0``: every packet this socket would receive is dropped, unacknowledged."""
    program = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0))
    _KEEP.append(program)
    fprog = struct.pack("HL", 1, ctypes.addressof(program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def service(listener: socket.socket, stop: bool) -> None:
    conn, _ = listener.accept()
    if stop:
        os.kill(os.getpid(), signal.SIGSTOP)  # its host acknowledges; it never reads
    else:
        drop_everything(conn)  # its host is gone: nothing is acknowledged
    time.sleep(10**6)


def start_service(stop: bool) -> int:
    """The service outside the job's process tree (double fork)."""
    return serve_outside(lambda listener: service(listener, stop))


def run(stop: bool) -> None:
    port = start_service(stop)
    sock = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.3)  # the service is set: dark, or stopped
    sock.sendall(b"GET /embeddings?batch=17 HTTP/1.1\r\nHost: feature-store\r\n\r\n")
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    while sock.recv(4096):  # no timeout: the answer
        pass


if __name__ == "__main__":
    run(stop=False)
