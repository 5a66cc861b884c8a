"""idle: an inference server with no traffic. An HTTP thread puts requests on a plain deque;
the scheduler (the main thread) busy-polls it with ``time.sleep(0)``, a common "low latency"
pattern. ``sleep(0)`` adds no Python frame: every sample shows ``scheduler_loop`` on the same
line, a share of a core burning - what one long computing call looks like. The kernel tells
them apart: tens of thousands of voluntary switches, the CPU in the kernel, nothing read or
written. Motion, not work: idle - not "slow: CPU-bound"."""

from __future__ import annotations

import collections
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, List, Tuple

pending: Deque[Tuple[bytes, threading.Event]] = collections.deque()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        done = threading.Event()
        pending.append((body, done))
        done.wait()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def run_batch(batch: List[Tuple[bytes, threading.Event]]) -> None:
    for _body, done in batch:
        sum(i * i for i in range(10000))
        done.set()


def scheduler_loop() -> None:
    while True:
        if not pending:
            time.sleep(0)  # yield, don't block: keeps latency low
            continue
        batch = []
        while pending and len(batch) < 8:
            batch.append(pending.popleft())
        run_batch(batch)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="http").start()
    print("listening on", server.server_address[1], flush=True)
    print("READY", flush=True)
    scheduler_loop()


if __name__ == "__main__":
    main()
