"""slow: 3 gloo ranks; at step 3 rank 1 fetches its next data shard from a local HTTP server
that answers 503 Service Unavailable (overloaded), and backs off with exponential sleeps that
honour the server's Retry-After (45 s on the third refusal), logging each retry. Ranks 0 and 2
wait for it in all_reduce. Rank 1 resumes by itself when its sleep ends: a slow job, not a
diverged rank."""

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
RETRY_AFTER_S = 45


class Overloaded(http.server.BaseHTTPRequestHandler):
    refusals = 0

    def do_GET(self) -> None:
        Overloaded.refusals += 1
        self.send_response(503)
        if Overloaded.refusals >= 3:
            self.send_header("Retry-After", str(RETRY_AFTER_S))
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def shard_server() -> str:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Overloaded)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/shard/3"


def fetch_shard(url: str, log: logging.Logger) -> bytes:
    delay_s = 0.5
    for attempt in range(1, 9):
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as err:
            wait_s = max(delay_s, float(err.headers.get("Retry-After") or 0))
            log.warning(
                "HTTP %d from %s; retrying in %.1f s (attempt %d/8)", err.code, url, wait_s, attempt
            )
            if wait_s >= 10:
                _gloo.mark("backing off")
            backoff(wait_s)
            delay_s *= 2
    raise RuntimeError("shard server never answered")


def backoff(seconds: float) -> None:
    time.sleep(seconds)


def train_step(step: int) -> None:
    import torch
    import torch.distributed as dist

    grad = torch.ones(1024) * step
    if step == 3 and _gloo.rank() == 1:
        log = logging.getLogger("loader")
        handler = logging.FileHandler(os.path.join(os.environ["DIAG_SCENARIO_DIR"], "loader.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        fetch_shard(shard_server(), log)
    if step == 3 and _gloo.rank() != 1:
        _gloo.mark("in all_reduce")
    dist.all_reduce(grad)


if __name__ == "__main__":
    _gloo.run_steps(__file__, WORLD_SIZE, train_step)
