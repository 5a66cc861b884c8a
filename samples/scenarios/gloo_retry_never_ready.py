"""deadlocked: 3 gloo ranks; at step 3 rank 1 waits for its data shard from a local HTTP
server that answers 503 to every request (its backend is gone for good), retrying every
second for ever and logging the same retry line each time. Ranks 0 and 2 wait in all_reduce.
Each sleep ends by itself, but the condition it waits for can never hold: stuck, not slow."""

from __future__ import annotations

import http.server
import logging
import os
import threading
import time
import urllib.error
import urllib.request

import _gloo

WORLD_SIZE = 3


class NoBackend(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def wait_for_shard(url: str, log: logging.Logger) -> bytes:
    attempt = 0
    while True:
        attempt += 1
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as err:
            log.warning("HTTP %d from %s; retrying in 1.0 s", err.code, url)
        if attempt == 8:
            _gloo.mark("retrying")
        time.sleep(1.0)


def train_step(step: int) -> None:
    import torch
    import torch.distributed as dist

    grad = torch.ones(1024) * step
    if step == 3 and _gloo.rank() == 1:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoBackend)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        log = logging.getLogger("loader")
        handler = logging.FileHandler(os.path.join(os.environ["DIAG_SCENARIO_DIR"], "loader.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        wait_for_shard(f"http://127.0.0.1:{server.server_address[1]}/shard/3", log)
    if step == 3 and _gloo.rank() != 1:
        _gloo.mark("in all_reduce")
    dist.all_reduce(grad)


if __name__ == "__main__":
    _gloo.run_steps(__file__, WORLD_SIZE, train_step)
