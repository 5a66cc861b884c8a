"""Shared layout of the start-up readiness scenarios: a server whose engine compiles at
start-up, caught parked between two compile steps.

    run(ready)  # the root serves HTTP, the engine child logs its compile bar, then parks

The root process (the API server) listens on its port from the start - its health endpoint
answers 503 until the engine is ready, as real servers do - and waits for the engine's ready
message on a pipe. The engine child writes a tqdm compile bar to its log and then waits for
its compile worker between two steps (a timed wait: nothing runs). With ``ready`` the engine
has finished: its log ends in a ready line and the API server logs that it serves.
"""

from __future__ import annotations

import http.server
import multiprocessing as mp
import os
import tempfile
import threading
import time
from typing import Any

import _ports

BAR = "Compiling kernels:  45%|####5     | 9/20 [00:10<00:12,  0.90it/s]"


def wait_for_compile_worker(step_done: threading.Event) -> None:
    """Between two compile steps: the next one starts when the worker hands back its result."""
    while not step_done.wait(timeout=5.0):
        pass


def engine(conn: Any, log_path: str, ready: bool) -> None:
    with open(log_path, "a", buffering=1) as log:
        log.write("INFO engine: loading model config\n")
        log.write(BAR + "\n")
        if ready:
            log.write("Compiling kernels: 100%|##########| 20/20 [00:22<00:00,  0.91it/s]\n")
            log.write("INFO engine: ready to serve requests\n")
            conn.send("ready")
            while True:
                conn.recv()  # waits for work from the API server
        wait_for_compile_worker(threading.Event())


def run(ready: bool) -> None:
    workdir = tempfile.mkdtemp(prefix="diag-startup-")
    engine_ready = threading.Event()

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if engine_ready.is_set() else 503)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _ports.service_port()), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ours, theirs = mp.Pipe()
    ctx = mp.get_context("fork")
    log_path = os.path.join(workdir, "engine.log")
    ctx.Process(target=engine, args=(theirs, log_path, ready), daemon=True).start()
    time.sleep(1.0)
    print(f"READY (port {server.server_address[1]})", flush=True)
    if ours.recv() == "ready":  # blocks until the engine says it is ready
        engine_ready.set()
        with open(os.path.join(workdir, "api.log"), "a", buffering=1) as api:
            api.write(f"INFO api: listening on 127.0.0.1:{server.server_address[1]}\n")
            threading.Event().wait()
