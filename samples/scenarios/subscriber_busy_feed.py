"""progressing: a job subscribes to a market-data feed - a TCP publisher outside the job (a
daemon elsewhere, double-forked here) streaming one JSON tick every 5 ms - and handles each
tick as it arrives: it parses it and updates a running average, in memory. No log, no file, no
port: its main thread blocks in ``recv`` between ticks, woken for each. It read "slow: a slow
transfer, network-bound" - it is consuming the feed, which is its work.

``run(csv=True)`` (subscriber_busy_feed_csv.py): the same consumer appends each tick's average
to a CSV file - output that moves (it had read the same, or, with the receive caught running,
a poll loop finding nothing). The contrasts: ``subscriber_quiet_feed`` (the feed sends
nothing: idle), ``download_trickles`` (kilobyte chunks of a file: a slow transfer).
"""

from __future__ import annotations

import json
import os
import random
import socket
import tempfile
import time

from _outside import serve_outside


def publish(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    conn.recv(4096)  # the subscribe line
    seq = 0
    while True:
        seq += 1
        tick = {"seq": seq, "pair": "EURUSD", "bid": 1.084 + random.random() / 1000}
        try:
            conn.sendall((json.dumps(tick) + "\n").encode())
        except OSError:
            os._exit(0)  # the subscriber is gone
        time.sleep(0.005)


def start_feed() -> int:
    """The publisher outside the job's process tree (double fork)."""
    return serve_outside(publish)


def run(csv: bool = False) -> None:
    port = start_feed()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"SUBSCRIBE fx.majors\n")
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-feed-")
    path = os.path.join(where, "eurusd_avg.csv") if csv else os.devnull
    average = 0.0
    with open(path, "a", buffering=1) as out:
        for count, line in enumerate(sock.makefile("r"), start=1):
            tick = json.loads(line)
            average += (tick["bid"] - average) / count
            if csv:
                out.write(f"{tick['seq']},{average:.6f}\n")
            if count == 50:
                print("READY", flush=True)


if __name__ == "__main__":
    run()
