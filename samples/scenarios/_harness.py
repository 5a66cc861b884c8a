"""Shared layout of the in-job client scenarios: a job that queries its own server, the way a
benchmark harness or an RL loop calls the inference server it started.

    run(handler_hangs)  # the root starts the server and the harness, prints READY, waits

The root process starts two children (fork): an HTTP server on a port (stdlib, a thread per
request; each answer waits 20 ms on a "backend" and sends 2 KiB) and a harness that sends one
request after another over a keep-alive connection and reads each answer with no timeout.
With ``handler_hangs`` the handler first takes a lock the server's warm-up kept: every request
waits on it forever, and so does the harness. Everything is inside the job's process tree:
no client outside it.
"""

from __future__ import annotations

import http.client
import http.server
import multiprocessing as mp
import threading
import time
from typing import Any

import _ports

BODY = b'{"text": "' + b"x" * 2048 + b'"}\n'


def serve(port_out: Any, handler_hangs: bool) -> None:
    backend = threading.Lock()
    if handler_hangs:
        backend.acquire()  # the warm-up took it and never gave it back

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            with backend:  # handler_hangs: blocks here forever
                time.sleep(0.02)
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _ports.service_port()), Handler)
    server.daemon_threads = True
    port_out.put(server.server_address[1])
    server.serve_forever()


def harness(port: int, done: Any) -> None:
    """The benchmark loop: one request, its whole answer, the next."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    while True:
        conn.request("GET", "/generate")
        conn.getresponse().read()
        with done.get_lock():
            done.value += 1


def run(handler_hangs: bool) -> None:
    ctx = mp.get_context("fork")
    ports = ctx.Queue()
    done = ctx.Value("i", 0)
    ctx.Process(target=serve, args=(ports, handler_hangs), daemon=True).start()
    port = ports.get(timeout=30)
    ctx.Process(target=harness, args=(port, done), daemon=True).start()
    if handler_hangs:
        time.sleep(1.0)  # the harness's first request is in, and waits
    else:
        while done.value < 50:
            time.sleep(0.1)
    print(f"READY (port {port})", flush=True)
    while True:
        time.sleep(3600)
