"""deadlocked: an HTTP server whose requests run on a fixed pool of 4 worker threads, every one
wedged. The first request's worker holds the cache lock across a wait for the `cache_ready`
Event that the refresher thread (dead at start-up, one logged traceback) was to set; the
other 3 workers queue on the lock, and the requests after them wait in the pool's queue. The
pile cannot grow past the pool: 3 threads on the lock in every sample. An in-job client with
a 1 s timeout logs each failure."""

from __future__ import annotations

import http.server
import logging
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

POOL_WORKERS = 4
cache_lock = threading.Lock()
cache_ready = threading.Event()
log = logging.getLogger("serve")


def refresh() -> None:
    raise TimeoutError("feature store did not answer")  # dies: nobody sets cache_ready


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        with cache_lock:
            cache_ready.wait()
            body = b"features"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class PoolServer(http.server.HTTPServer):
    """Each request on a fixed pool of worker threads (as a threadpool front end does)."""

    pool = ThreadPoolExecutor(POOL_WORKERS, thread_name_prefix="worker")

    def process_request(self, request: Any, client_address: Any) -> None:
        self.pool.submit(self._handle, request, client_address)

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


def client(port: int) -> None:
    n = 0
    while True:
        n += 1
        t0 = time.monotonic()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/features?n={n}", timeout=1.0).read()
            log.info("request %d ok", n)
        except (OSError, socket.timeout) as exc:
            reason = getattr(exc, "reason", exc)
            log.warning("request %d FAILED after %.1f s: %s", n, time.monotonic() - t0, reason)
        time.sleep(0.2)


def main() -> None:
    where = tempfile.mkdtemp(prefix="diag-pool-")
    path = os.path.join(where, "serve.log")
    logging.basicConfig(filename=path, format="%(asctime)s %(levelname)s %(message)s")
    sys.stderr = open(path, "a", buffering=1)  # noqa: SIM115 (the traceback goes there)
    threading.Thread(target=refresh, name="refresher", daemon=True).start()
    server = PoolServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=client, args=(port,), name="client", daemon=True).start()
    time.sleep(6.0)  # the pool fills: 4 requests, then the queue
    print("READY", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
