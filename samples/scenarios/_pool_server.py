"""An inference server of the standard library: ``/predict`` runs on a 2-thread
``ThreadPoolExecutor`` calling a backend (``backend_s`` seconds a call), ``/health`` is answered
by the request thread itself, and every access is logged to a file. A prober outside the job
(double-forked into its own session, as a load balancer or a kubelet is) sends 6 predictions
and then probes ``/health`` every second. READY once the predictions are in flight."""

from __future__ import annotations

import concurrent.futures as cf
import http.server
import os
import signal
import tempfile
import threading
import time
import urllib.request

import _ports

LIFETIME_S = 600  # everything ends by then, whatever happens (SIGALRM's default action)


def serve(backend_s: float) -> None:
    signal.alarm(LIFETIME_S)
    pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="predict")
    log = open(  # noqa: SIM115 - open for the server's life, as a logging handler keeps it
        os.path.join(tempfile.mkdtemp(prefix="diag-pool-"), "access.log"), "a"
    )

    def slow_backend(x: int) -> int:
        time.sleep(backend_s)  # the feature store's answer
        return x

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (
                b"ok" if self.path == "/health" else b"%d" % pool.submit(slow_backend, 1).result()
            )
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt: str, *args: object) -> None:
            log.write(f"{self.address_string()} - {fmt % args}\n")
            log.flush()

    port = _ports.service_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    middle = os.fork()
    if middle == 0:
        os.setsid()
        server.socket.close()  # the listener is the server's alone
        if os.fork() == 0:
            _probe(port)
        os._exit(0)
    os.waitpid(middle, 0)  # the prober is reparented away: no zombie left in the job
    threading.Timer(3.0, lambda: print("READY", flush=True)).start()
    server.serve_forever()


def _probe(port: int) -> None:
    """Six predictions at once, then a health check every second, until the server is gone."""
    signal.alarm(LIFETIME_S)

    def predict() -> None:
        while True:
            try:
                urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/predict", timeout=LIFETIME_S
                ).read()
            except OSError:
                time.sleep(1)

    for _ in range(6):
        threading.Thread(target=predict, daemon=True).start()
    refused = 0
    while refused < 3:  # the server is gone: so is its prober
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
            refused = 0
        except OSError:
            refused += 1
        time.sleep(1.0)
    os._exit(0)
