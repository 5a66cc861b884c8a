"""progressing, with its failure rate: a threaded HTTP server where every third request's
handler is slow (2 s) and the in-job client, with a 1 s timeout, logs it as failed; the others
are answered at once and logged "ok". Failures beside completions: the job progresses, and
the summary carries how many requests failed."""

from __future__ import annotations

import http.server
import logging
import os
import socket
import tempfile
import threading
import time
import urllib.request

log = logging.getLogger("serve")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        n = int(self.path.rsplit("=", 1)[-1])
        if n % 3 == 0:
            time.sleep(2.0)  # a slow request: the client gives up first
        body = b"result"
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


def client(port: int) -> None:
    n = 0
    while True:
        n += 1
        t0 = time.monotonic()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/generate?n={n}", timeout=1.0).read()
            log.info("request %d completed in %.2f s", n, time.monotonic() - t0)
        except (OSError, socket.timeout) as exc:
            reason = getattr(exc, "reason", exc)
            log.warning("request %d FAILED after %.1f s: %s", n, time.monotonic() - t0, reason)
        time.sleep(0.1)


def main() -> None:
    where = tempfile.mkdtemp(prefix="diag-somefail-")
    logging.basicConfig(
        filename=os.path.join(where, "serve.log"),
        format="%(asctime)s %(levelname)s %(message)s",
        level=logging.INFO,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=client, args=(port,), name="client", daemon=True).start()
    time.sleep(3.0)
    print("READY", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
