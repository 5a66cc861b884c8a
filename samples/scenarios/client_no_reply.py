"""deadlocked: a client waits for an HTTP reply that never comes - the model server (not part of
this job: a daemon elsewhere) accepted the request and hangs. The client sits in a socket read
with no timeout; it listens on nothing and no timer will wake it."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from _outside import serve_outside


def hung_server(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    conn.recv(65536)  # reads the request, never answers
    time.sleep(10**6)


def start_daemon() -> int:
    """A server outside the client's process tree (double fork), as a remote service is."""
    return serve_outside(hung_server)


def generate(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/generate") as reply:  # no timeout
        return bytes(reply.read())


def main() -> None:
    port = start_daemon()
    threading.Timer(0.5, lambda: print("READY", flush=True)).start()  # once blocked in the read
    print(generate(port))


if __name__ == "__main__":
    main()
