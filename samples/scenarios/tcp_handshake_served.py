"""idle (the contrast of ``tcp_handshake_both_recv``): a parameter server and its worker (a
forked child) over TCP, the handshake done - the worker sent its hello, got its weights header
and waits for the next command; the server waits in ``accept`` for more workers. A client can
connect and end the server's wait: a door, healthy."""

from __future__ import annotations

import os
import signal
import socket
import time

LIFETIME_S = 600  # SIGALRM's default action ends both processes then, whatever happens


def worker(port: int) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"helo")
    conn.recv(4)  # the weights header
    conn.recv(4)  # the next command: none yet
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
    conn.recv(4)
    conn.sendall(b"wts0")
    time.sleep(0.5)
    print("READY", flush=True)
    try:
        listener.accept()  # the next worker
    finally:
        os.kill(child, 9)


if __name__ == "__main__":
    main()
