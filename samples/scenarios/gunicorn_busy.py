"""progressing: real gunicorn, 2 sync workers kept busy by 3 outside clients on a CPU-bound
endpoint (~10 ms of pure-Python scoring per request); no access log, the answers go out with
send(), so no file grows: the workers' CPU and their sockets are the progress."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Callable, Iterable

from _gunicorn import serve

served = mp.RawValue("i", 0)  # shared with the forked workers


def score(n: int) -> int:
    total = 0
    for i in range(n):
        total = (total * 31 + i * i) % 1_000_003
    return total


def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = b'{"score": %d}' % score(20_000)
    served.value += 1
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


if __name__ == "__main__":
    serve(app, ready=lambda: served.value >= 20, clients=("/score", 3))
