"""idle: a feature-refresh job subscribes to a price feed - a TCP publisher outside the job (a
daemon elsewhere, double-forked here) - sends its one subscribe line, gets the snapshot, and
then blocks in ``recv`` for the next update. The market is closed: the feed is alive and has
nothing to say. Nothing is owed to the subscriber - it asked nothing that waits for an answer -
so it waits for the outside, not on a peer that never answers.

``run(answer=False)`` (subscriber_request_unanswered.py): the contrast - the same client sends
a request the feed never answers (it read it and hangs): a reply is owed and never comes.
``run(answer=False, compute=True)`` (subscriber_request_computing.py): the feed burns a core
on the request - the reply is being computed: slow, the feed named. The feed exits when its
client is gone.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time

from _outside import serve_outside


def feed(listener: socket.socket, answer: bool, compute: bool = False) -> None:
    conn, _ = listener.accept()
    conn.recv(4096)  # the subscribe line, or the request
    if answer:
        conn.sendall(b'{"snapshot": {"EURUSD": 1.0841}}\n')
    while True:  # then silence (or a long computation), until the client is gone
        if compute:
            until = time.monotonic() + 0.2
            while time.monotonic() < until:
                pass
        if select.select([conn], [], [], 0 if compute else 1.0)[0] and not conn.recv(1):
            os._exit(0)


def start_feed(answer: bool, compute: bool = False) -> int:
    """The publisher outside the job's process tree (double fork)."""
    return serve_outside(lambda listener: feed(listener, answer, compute))


def run(answer: bool, compute: bool = False) -> None:
    port = start_feed(answer, compute)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"SUBSCRIBE fx.majors\n" if answer else b"GET /quote?pair=EURUSD\n")
    if answer:
        sock.recv(4096)  # the snapshot
    threading.Timer(0.5, lambda: print("READY", flush=True)).start()
    while True:
        update = sock.recv(4096)  # no timeout: the next update, or the reply
        if not update:
            break


if __name__ == "__main__":
    run(answer=True)
