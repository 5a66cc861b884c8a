"""idle: a stdlib server that busy-polls instead of blocking - ``selector.select(timeout=0)``
on its listening socket, again and again. One core at ~100% and a stack that moves between
the loop and the zero-timeout select: motion with nothing to receive - idle, waiting for
requests, not "slow: CPU-bound"."""

from __future__ import annotations

import random
import selectors
import socket


def answer(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.sendall(b"ok\n")


def serve_spinning(listener: socket.socket) -> None:
    """Lowest latency, no blocking call: poll, poll, poll."""
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    while True:
        if sel.select(timeout=0):
            answer(listener)


def main() -> None:
    listener = socket.socket()
    for port in random.sample(range(20000, 30000), 200):
        try:
            listener.bind(("127.0.0.1", port))
            break
        except OSError:
            continue
    listener.listen()
    listener.setblocking(False)
    print(f"READY (port {listener.getsockname()[1]})", flush=True)
    serve_spinning(listener)


if __name__ == "__main__":
    main()
