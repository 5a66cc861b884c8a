"""idle: a feature-refresh job subscribes to a price feed - a TCP publisher outside the job (a
daemon elsewhere, double-forked here) - sends its one subscribe line, gets the snapshot, and
then blocks in ``recv`` for the next update. The market is closed: the feed is alive and has
nothing to say. Nothing is owed to the subscriber - it asked nothing that waits for an answer -
so it waits for the outside, not on a peer that never answers.

``run(answer=False)`` (subscriber_request_unanswered.py): the contrast - the same client sends
a request the feed never answers (it read it and hangs): a reply is owed and never comes.
"""

from __future__ import annotations

import os
import socket
import threading
import time


def feed(listener: socket.socket, answer: bool) -> None:
    conn, _ = listener.accept()
    conn.recv(4096)  # the subscribe line, or the request
    if answer:
        conn.sendall(b'{"snapshot": {"EURUSD": 1.0841}}\n')
    time.sleep(10**6)  # then silence


def start_feed(answer: bool) -> int:
    """The publisher outside the job's process tree (double fork)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])
    if os.fork() == 0:
        if os.fork() == 0:
            feed(listener, answer)
        os._exit(0)
    os.wait()
    listener.close()
    return port


def run(answer: bool) -> None:
    port = start_feed(answer)
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
