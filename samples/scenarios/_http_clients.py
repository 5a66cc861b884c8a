"""HTTP clients for the serving scenarios, started *outside* the job's process tree.

A real server's clients run elsewhere: `diag capture --pid SERVER` sees the server alone, its
sockets connected to peers that are not part of the job. So the scenario double-forks: the
client is a grandchild re-parented away from the server (not one of its descendants), but it
keeps the scenario's process group, so the harness's `killpg` still ends it.

    python _http_clients.py PORT PATH N_CLIENTS   # N threads, each GETs PATH in a loop

Each client thread sends one request at a time and waits for the answer with no timeout (a
waiting client blocks for as long as the server takes), then sends the next.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from typing import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))


def start_detached(port: int, path: str, n_clients: int) -> None:
    """Run this module as a process that is not a descendant of the caller."""
    argv = [sys.executable, os.path.join(HERE, "_http_clients.py"), str(port), path]
    argv.append(str(n_clients))
    child = os.fork()
    if child == 0:
        try:
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.execv(sys.executable, argv)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def _one_client(port: int, path: str) -> None:
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port))
        except OSError:
            os._exit(0)  # the server is gone: so is its traffic (never spin on a dead port)
        with sock:
            try:
                while True:  # keep-alive: one request, its whole answer, the next
                    sock.sendall(request)
                    if not _read_response(sock):
                        break
            except OSError:
                continue


def _read_response(sock: socket.socket) -> bool:
    """Read one response (Content-Length framed); False when the server closed the socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        body += chunk
    return b"connection: close" not in head.lower()


def main(argv: Sequence[str]) -> None:
    port, path, n = int(argv[0]), argv[1], int(argv[2])
    threads = [threading.Thread(target=_one_client, args=(port, path)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1:])
