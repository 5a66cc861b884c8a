"""deadlocked, not "idle: :PORT listening - healthy, waiting for work": a parameter server and
its worker (a forked child) connect over TCP and both wait to read first - the server for the
worker's hello, the worker for the server's weights header (a protocol mismatch). The server
still holds its listening socket, but no thread of it accepts: a client could connect and
queue in the backlog, and nothing would wake. The two reads are a cycle nothing ends.
Contrast: ``tcp_handshake_served`` (the handshake done, the server accepts the next worker)."""

from __future__ import annotations

import os
import signal
import socket
import time

LIFETIME_S = 600  # SIGALRM's default action ends both processes then, whatever happens


def worker(port: int) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.recv(4)  # waits for the server's weights header first
    os._exit(0)


def main() -> None:
    signal.alarm(LIFETIME_S)  # inherited by the fork
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    child = os.fork()
    if child == 0:
        signal.alarm(LIFETIME_S)
        listener.close()
        worker(port)
    conn, _ = listener.accept()
    time.sleep(0.5)
    print("READY", flush=True)
    try:
        conn.recv(4)  # waits for the worker's hello first
    finally:
        os.kill(child, 9)


if __name__ == "__main__":
    main()
