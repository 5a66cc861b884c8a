"""Shared layout of the SGLang-like scenarios: an HTTP front-end process and N scheduler
processes named the way SGLang names them (``prctl(PR_SET_NAME)``, as ``setproctitle`` does),
talking over multiprocessing Pipes - no torch, no RANK env, no launcher."""

from __future__ import annotations

import ctypes
import http.server
import multiprocessing as mp
import socketserver
import threading
from multiprocessing.connection import Connection
from typing import Callable, List, Tuple

PR_SET_NAME = 15


def set_thread_name(name: str) -> None:
    """What setproctitle/SGLang do to make ``ps``/``top`` show the role (comm: 15 bytes)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def scheduler_loop(tp_rank: int, conn: Connection, spin_on: int) -> None:
    set_thread_name(f"sglang::sched_{tp_rank}")
    while True:
        request = conn.recv()  # blocks until the front-end hands over a batch
        if request is None:
            return
        if tp_rank == spin_on:
            forward_batch_stuck(request)
        conn.send(("done", tp_rank, request))


def forward_batch_stuck(request: object) -> None:
    """A scheduler that never finishes its batch: a pure-Python loop whose exit never comes."""
    total = 0
    while total >= 0:
        total = (total * 31 + 7) % 1_000_003


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")


def start(n_schedulers: int, spin_on: int) -> Tuple[socketserver.TCPServer, List[Connection]]:
    """Start the schedulers and the HTTP front-end (serving in a thread); returns both."""
    set_thread_name("sglang::http")
    ctx = mp.get_context("spawn")
    conns: List[Connection] = []
    for tp_rank in range(n_schedulers):
        here, there = ctx.Pipe()
        ctx.Process(target=scheduler_loop, args=(tp_rank, there, spin_on), daemon=True).start()
        conns.append(here)
    server = socketserver.TCPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    print(f"listening on {server.server_address[1]}", flush=True)
    return server, conns


def after(delay_s: float, action: Callable[[], None]) -> None:
    threading.Timer(delay_s, action).start()
