"""progressing: a feature service inside the job - a ``ThreadingHTTPServer`` that starts a
thread per request and closes the connection after each answer (HTTP/1.0), no access log -
and a trainer-side client process, also the job's, that looks up a feature vector every 50 ms;
each answer takes a few milliseconds of hashing. Between samples every connection has come and
gone: no open connection, no log line, the server's threads in ``select`` and the client in
``sleep`` at every sample. The work shows only across samples: connections accepted and
closed (TIME_WAIT), the server's CPU.

``run(clients=0)`` (threaded_server_no_client.py): the contrast, the same server with no
client - idle.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import sys
import time
import urllib.request
from typing import Any

import _ports

PAUSE_S = 0.05


class Features(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        digest = hashlib.sha256()
        for _ in range(300):  # a few ms of work per request
            digest.update(self.path.encode() * 200)
        body = json.dumps({"key": self.path, "vec": digest.hexdigest()}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass  # no access log


def lookups(port: int) -> None:
    """The client: one short request, its answer, a pause, the next - a new connection each."""
    n = 0
    while True:
        n += 1
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/user/{n}", timeout=10) as r:
            r.read()
        time.sleep(PAUSE_S)


def run(clients: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", _ports.service_port()), Features)
    server.daemon_threads = True
    port = server.server_address[1]
    for _ in range(clients):
        if os.fork() == 0:
            server.socket.close()
            try:
                lookups(port)
            finally:
                os._exit(0)
    print(f"READY (port {port})", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    run(clients=1)
