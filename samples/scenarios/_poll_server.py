"""Shared layout of the poll-loop server scenarios: the shape of an inference server whose
schedulers busy-poll for work, built from the parts such servers use (pyzmq, torch.distributed
gloo), no framework.

- The front end (the root process) serves HTTP on a port; a request is handed to rank 0 over a
  ZeroMQ ``ipc://`` PUSH socket and its answer read back from a PULL socket.
- N ranks (``RANK``/``WORLD_SIZE`` in their environment, process titles ``engine::TP<n>``) run
  one scheduler loop each: rank 0 drains its ZeroMQ socket with ``NOBLOCK`` (an empty socket
  raises ``zmq.Again``), broadcasts the batch - empty when idle - to the other ranks through
  gloo every iteration, computes it when there is one, and otherwise runs an ``on_idle`` hook.
  Idle, every rank burns a core and rank 0 and 1 exchange bytes over loopback: no work.

    start(n_ranks, batch_ms) -> (server, port): the front end's HTTP server (not yet serving)
"""

from __future__ import annotations

import ctypes
import http.server
import multiprocessing as mp
import os
import socket
import tempfile
import threading
import time
from multiprocessing import resource_tracker
from typing import Any, List, Tuple

PR_SET_NAME = 15


def _title(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the ranks -------------------------------------------------------------------------------


def run_batch(batch: List[Any], batch_ms: float) -> List[Any]:
    """The model's forward, in pure Python: ``batch_ms`` of CPU per request."""
    out = []
    for req in batch:
        total, until = 0, time.perf_counter() + batch_ms / 1000.0
        while time.perf_counter() < until:
            for i in range(2000):
                total = (total * 31 + i) % 1_000_003
        out.append((req, total))
    return out


def broadcast_batch(batch: List[Any], rank: int) -> List[Any]:
    """Rank 0's batch to every rank: its size first (0 when idle), then its bytes."""
    import pickle

    import torch
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return batch
    size = torch.tensor([0], dtype=torch.long)
    data = pickle.dumps(batch) if rank == 0 and batch else b""
    size[0] = len(data)
    dist.broadcast(size, src=0)
    if int(size[0]) == 0:
        return []
    buf = torch.frombuffer(bytearray(data), dtype=torch.uint8) if rank == 0 else None
    if buf is None:
        buf = torch.empty(int(size[0]), dtype=torch.uint8)
    dist.broadcast(buf, src=0)
    return list(pickle.loads(buf.numpy().tobytes()))


def recv_requests(rank: int, inbox: Any) -> List[Any]:
    """Rank 0 takes whatever the front end sent (nothing: ``zmq.Again`` at once)."""
    import zmq

    batch: List[Any] = []
    while rank == 0:
        try:
            batch.append(inbox.recv_pyobj(zmq.NOBLOCK))
        except zmq.Again:
            break
    return broadcast_batch(batch, rank)


class LoadStats:
    """What a scheduler reports about its load (running, queued, free slots)."""

    def __init__(self) -> None:
        self.slots = [0] * 4096
        self.idle_polls = 0


def get_loads(stats: LoadStats) -> Tuple[int, int]:
    return sum(stats.slots), stats.slots.count(0)


def on_idle(stats: LoadStats) -> None:
    """What an idle scheduler does between polls: recompute its load for the balancer, then
    poll again (no sleep: the default, lowest-latency setting)."""
    stats.idle_polls += 1
    get_loads(stats)


def event_loop(rank: int, inbox: Any, outbox: Any, batch_ms: float) -> None:
    stats = LoadStats()
    while True:
        batch = recv_requests(rank, inbox)
        if batch:
            done = run_batch(batch, batch_ms)
            if rank == 0:
                for item in done:
                    outbox.send_pyobj(item)
        else:
            on_idle(stats)


def rank_main(rank: int, world: int, ipc: str, batch_ms: float) -> None:
    import torch.distributed as dist
    import zmq

    _title(f"engine::TP{rank}")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ctx = zmq.Context()
    inbox = outbox = None
    if rank == 0:
        inbox = ctx.socket(zmq.PULL)
        inbox.connect(f"ipc://{ipc}/in")
        outbox = ctx.socket(zmq.PUSH)
        outbox.connect(f"ipc://{ipc}/out")
    event_loop(rank, inbox, outbox, batch_ms)


# --- the front end ---------------------------------------------------------------------------


class FrontEnd:
    """Hands each request to rank 0 and waits for its answer (one at a time)."""

    def __init__(self, ipc: str) -> None:
        import zmq

        self.ctx = zmq.Context()
        self.push = self.ctx.socket(zmq.PUSH)
        self.push.bind(f"ipc://{ipc}/in")
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.bind(f"ipc://{ipc}/out")
        self.lock = threading.Lock()
        self.served = 0
        self.next_id = 0

    def generate(self) -> bytes:
        with self.lock:
            self.next_id += 1
            self.push.send_pyobj(self.next_id)
            req, total = self.pull.recv_pyobj()
            self.served += 1
            return b'{"id": %d, "out": %d}\n' % (req, total)


def _handler(front: FrontEnd) -> Any:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = front.generate()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def start(n_ranks: int, batch_ms: float) -> Tuple[http.server.HTTPServer, int, FrontEnd]:
    """Start the ranks and the front end; one request round trip proves the path works."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        WORLD_SIZE=str(n_ranks),
        OMP_NUM_THREADS="1",
    )
    resource_tracker.ensure_running()  # started before RANK is set: it is no rank
    ipc = tempfile.mkdtemp(prefix="diag-poll-")
    front = FrontEnd(ipc)
    ctx = mp.get_context("spawn")
    for rank in range(n_ranks):
        os.environ["RANK"] = str(rank)  # in each child's environment at exec
        ctx.Process(target=rank_main, args=(rank, n_ranks, ipc, batch_ms), daemon=True).start()
    del os.environ["RANK"]
    front.generate()  # the warm-up request: every rank is in its loop now
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(front))
    server.daemon_threads = True
    return server, int(server.server_address[1]), front
