"""idle: an HTTP front end (the parent) and an engine process that waits for requests by
spinning on a shared-memory slot (``mp.Value``) with ``os.sched_yield()`` - the vLLM/SGLang
style low-latency handoff. No traffic. ``sched_yield`` adds no Python frame and leaves the
thread runnable: every sample shows ``engine`` on the same line, running, ~100% of a core -
most of it in the kernel, nothing read, written or filled. Busy-polling an empty mailbox is
motion, not work: idle - not "slow: CPU-bound in `engine`"."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def engine(slot: Any, result: Any) -> None:
    while True:
        if slot.value == 0:
            os.sched_yield()
            continue
        n = slot.value
        result.value = sum(i * i for i in range(n)) % 1000
        slot.value = 0


def main() -> None:
    slot = mp.Value(ctypes.c_long, 0, lock=False)
    result = mp.Value(ctypes.c_long, 0, lock=False)
    mp.Process(target=engine, args=(slot, result), name="engine", daemon=True).start()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            slot.value = 10000
            while slot.value:
                time.sleep(0.001)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"%d" % result.value)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("listening on", server.server_address[1], flush=True)
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
