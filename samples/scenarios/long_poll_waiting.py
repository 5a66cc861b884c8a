"""idle: a job-status service inside the job answers ``GET /events`` as a long poll - each
handler thread waits up to 30 s on a condition for the next job event, then answers (204 when
none came). Three watcher processes of the job hold a request open each; no event comes during
the capture. The requests are unanswered and the server does nothing - the picture of a wedged
handler - but each handler's wait has a timeout the kernel reports: it answers by itself.

``run(events=True)`` (long_poll_answering.py): the contrast - an event every 0.3 s, each
long poll answered and re-sent at once.
"""

from __future__ import annotations

import http.server
import os
import threading
import time
import urllib.request
from typing import Any

import _ports

POLL_S = 30.0
changed = threading.Condition()
events: list = []  # type: ignore[type-arg]


class Events(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        with changed:
            seen = len(events)
            changed.wait_for(lambda: len(events) > seen, timeout=POLL_S)
            body = str(events[seen:]).encode() if len(events) > seen else b""
        self.send_response(200 if body else 204)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def watcher(port: int) -> None:
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/events", timeout=120) as r:
            r.read()


def run(events_on: bool) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", _ports.service_port()), Events)
    server.daemon_threads = True
    port = server.server_address[1]
    for _ in range(3):
        if os.fork() == 0:
            server.socket.close()
            watcher(port)
            os._exit(0)
    if events_on:
        threading.Thread(target=publish, daemon=True).start()
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    server.serve_forever()


def publish() -> None:
    """The job's events: one every 0.3 s (the contrast only)."""
    while True:
        time.sleep(0.3)
        with changed:
            events.append({"step": len(events)})
            changed.notify_all()


if __name__ == "__main__":
    run(events_on=False)
