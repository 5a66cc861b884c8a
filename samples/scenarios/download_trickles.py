"""slow: a job shells out to a downloader (as it would to ``aws s3 cp``) and waits for it; the
store outside the job (a daemon elsewhere, double-forked here) trickles the file at 4 KiB/s.
The job's main process sleeps in ``wait4``, the downloader blocks in ``recv`` - no CPU, no log
line, no file growing: it read "idle: it wakes on a timer". tcp_info on the downloader's
connection says data keeps arriving (``tcpi_bytes_received`` grows, the last byte came a
moment ago): a slow transfer, not a wait. A socket's recv() is no read() - the process's rchar
never shows it.

The contrast is ``subscriber_quiet_feed``: the same kind of outside peer sending nothing (idle).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from _outside import serve_outside

CHUNK = 2048
EVERY_S = 0.5

DOWNLOADER = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"GET /models/weights-00001.bin\\n")
body = bytearray()  # held in memory until complete, as ``requests.get(...).content`` does
while True:
    chunk = c.recv(65536)
    if not chunk:
        break
    body += chunk
"""


def _store(listener: socket.socket) -> None:
    """The store: read the request, then send ``CHUNK`` every ``EVERY_S`` until the client
    is gone."""
    conn, _ = listener.accept()
    conn.recv(4096)
    try:
        while True:
            conn.sendall(b"x" * CHUNK)
            time.sleep(EVERY_S)
    except OSError:
        os._exit(0)


def start_store() -> int:
    return serve_outside(_store, new_session=True)


def main() -> None:
    port = start_store()
    child = subprocess.Popen([sys.executable, "-c", DOWNLOADER, str(port)])
    time.sleep(1.5)
    print("READY", flush=True)
    child.wait()


if __name__ == "__main__":
    main()
