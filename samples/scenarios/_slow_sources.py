"""Shared body of the slow-phase scenarios (issue #37): rank 0 of a gloo job fetches its
weights - from a slow mount or a slow HTTP mirror - while its peers wait for it in a barrier;
then every rank trains, logging a step every few. ``DIAG_SOURCE_RATE`` (bytes per second) sets
the source's pace: the default is a slow one (a phase that outlasts a capture); a fast one is
the healthy contrast (the load is over before the capture, which sees the steps).

The HTTP mirror runs outside the job's process tree (double fork), as a real mirror is not the
job's, and exits once the launcher is gone."""

from __future__ import annotations

import http.server
import logging
import os
import socketserver
import sys
import tempfile
import time
from typing import Callable

import _gloo

WORLD_SIZE = 3
SLOW_RATE = 1 << 20  # 1 MiB/s: 64 MiB take about a minute
SIZE_BYTES = 64 << 20
CHUNK_BYTES = 64 << 10


def rate() -> float:
    return float(os.environ.get("DIAG_SOURCE_RATE", SLOW_RATE))


def run_rank(fetch: Callable[[], None], phase: str) -> None:
    """A rank's life: rank 0 runs ``fetch`` while the others wait in a barrier, then steps."""
    import _gloo_steps
    import torch
    import torch.distributed as dist

    _gloo.init()
    torch.set_num_threads(1)
    rank = _gloo.rank() or 0
    log = logging.getLogger("train")
    if rank == 0:
        where = os.environ.get("DIAG_SCENARIO_DIR", tempfile.gettempdir())
        handler = logging.FileHandler(os.path.join(where, "train.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        _gloo.mark(phase)
        fetch()
        log.info("%s done", phase)
    else:
        _gloo.mark("barrier")
    dist.barrier()
    weights = torch.randn(256, 256) / 16
    for step in range(10**9):
        grad = _gloo_steps.forward_backward(weights, 50)
        dist.all_reduce(grad)
        weights -= 1e-4 * grad
        if step % 5 == 0:
            log.info("step %d norm %.4f", step, float(weights.norm()))


def read_file(path: str) -> None:
    """A ``read()`` loader: the file in chunks, front to back."""
    with open(path, "rb", buffering=0) as fh:
        while fh.read(CHUNK_BYTES):
            pass


def download(url: str, dest_dir: str) -> None:
    """Download ``url`` into a file of ``dest_dir`` in chunks, as a hub client does."""
    import urllib.request

    path = os.path.join(dest_dir, "model-00001-of-00001.safetensors.incomplete")
    with urllib.request.urlopen(url, timeout=600) as resp, open(path, "wb") as out:
        while True:
            chunk = resp.read(CHUNK_BYTES)
            if not chunk:
                break
            out.write(chunk)
    os.unlink(path)


class _Mirror(http.server.BaseHTTPRequestHandler):
    rate = float(SLOW_RATE)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(SIZE_BYTES))
        self.end_headers()
        block = b"\0" * CHUNK_BYTES
        start = time.monotonic()
        for i in range(SIZE_BYTES // CHUNK_BYTES):
            self.wfile.write(block)
            time.sleep(max(0.0, start + (i + 1) * CHUNK_BYTES / self.rate - time.monotonic()))

    def log_message(self, *args: object) -> None:
        pass


def _serve_mirror(port_file: str, watch_pid: int, pace: float) -> None:
    _Mirror.rate = pace
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Mirror)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as fh:
        fh.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        try:
            os.kill(watch_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        time.sleep(0.5)


def start_mirror() -> str:
    """Start the rate-limited mirror outside the caller's tree; its URL."""
    port_file = os.path.join(tempfile.mkdtemp(prefix="diag-mirror-"), "port")
    watch = os.getpid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _serve_mirror(port_file, watch, rate())
            os._exit(0)
        os._exit(0)
    os.wait()
    deadline = time.monotonic() + 20
    while not os.path.exists(port_file):
        if time.monotonic() > deadline:
            sys.exit("mirror: never came up")
        time.sleep(0.05)
    with open(port_file) as fh:
        return f"http://127.0.0.1:{fh.read().strip()}/model.safetensors"
