"""deadlocked: a threaded HTTP server whose handlers wedge. Each request thread takes the model
lock and, holding it, waits for the `warm` Event that a background warm-up thread was to set -
but that thread died at start-up (one logged "Exception in thread warmup" traceback). The
first request holds the lock for ever; every later request thread queues on it. An in-job
client with a 1 s timeout logs "FAILED after 1.0 s: timed out" and "cancelled" for each
request, and polls /health, which the server answers 200 all along (its access log shows it):
the only output that moves is failure, and health checks."""

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

model_lock = threading.Lock()
warm = threading.Event()
log = logging.getLogger("serve")


def warm_up() -> None:
    raise RuntimeError("could not load the tokenizer: /models/tok.json missing")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health":  # answers, whatever the model does
            self._answer(200, b"ok")
            return
        with model_lock:
            warm.wait()  # nobody sets it: the warm-up thread died
            self._answer(200, b"result")

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """An access line per answered request, uvicorn's way (only /health gets answered)."""
        log.info('%s - "%s" %s', self.client_address[0], self.requestline, args[1])


def client(port: int) -> None:
    n = 0
    while True:
        n += 1
        t0 = time.monotonic()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/generate?n={n}", timeout=1.0).read()
            log.info("request %d ok in %.1f s", n, time.monotonic() - t0)
        except (OSError, socket.timeout) as exc:
            reason = getattr(exc, "reason", exc)
            log.warning("request %d FAILED after %.1f s: %s", n, time.monotonic() - t0, reason)
            log.warning("request %d cancelled: client disconnected", n)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as ok:
            ok.read()  # its health endpoint answers 200 all along
        time.sleep(0.1)


def main() -> None:
    where = tempfile.mkdtemp(prefix="diag-wedge-")
    logging.basicConfig(
        filename=os.path.join(where, "serve.log"),
        format="%(asctime)s %(levelname)s %(message)s",
        level=logging.INFO,
    )
    sys.stderr = open(os.path.join(where, "serve.log"), "a", buffering=1)  # noqa: SIM115
    threading.Thread(target=warm_up, name="warmup", daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=client, args=(port,), name="client", daemon=True).start()
    time.sleep(3.0)
    print(f"PORT {port}", flush=True)  # its health endpoint, for a test to ask
    print("READY", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
