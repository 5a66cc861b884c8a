"""idle: a small HTTP service - ``serve_forever`` in a thread, the main thread waiting untimed
on a stop Event its SIGTERM handler sets - ready, no client. Its log (``2> job.log``) is shared
with a helper child whose ``metrics`` thread died at start-up ("Exception in thread metrics:
ConnectionError" in the log) and which then sleeps. Nothing of the service waits on that
thread. It once read "deadlocked: waits in Event.wait ... for thread metrics, which died - kill
it" (waits_for_dead_thread took the shared log's death line for the service's own)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")


def helper() -> None:
    def metrics() -> None:
        raise ConnectionError("pushgateway at 10.0.0.7:9091 unreachable")

    threading.Thread(target=metrics, name="metrics").start()
    time.sleep(10**6)


def run_service(stop: threading.Event, server: ThreadingHTTPServer) -> None:
    stop.wait()  # until SIGTERM
    server.shutdown()


def main() -> None:
    work = tempfile.mkdtemp(prefix="diag-stop-event-")
    log = open(os.path.join(work, "job.log"), "a", buffering=1)  # noqa: SIM115
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)  # the helper inherits it: one log for both
    subprocess.Popen([sys.executable, __file__, "helper"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    stop = threading.Event()

    def on_term(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    threading.Timer(2.0, lambda: print("READY", file=ready_out, flush=True)).start()
    run_service(stop, server)


if __name__ == "__main__":
    if sys.argv[1:2] == ["helper"]:
        helper()
    else:
        main()
