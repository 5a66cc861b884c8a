"""deadlocked: real gunicorn, 2 sync workers, each stuck in a request that can never finish:
the app takes its model lock at import (a preloaded warm-up that never let go), the workers
were forked holding a copy of it, and the handler's `MODEL_LOCK.acquire()` (no timeout) waits
for an owner that does not exist in the worker. 4 outside clients wait: 2 inside the stuck
handlers, 2 in the listen backlog. The arbiter still ticks in select once a second."""

from __future__ import annotations

import multiprocessing as mp
import threading
from typing import Any, Callable, Iterable

from _gunicorn import serve

MODEL_LOCK = threading.Lock()
MODEL_LOCK.acquire()  # the warm-up that never released it (in the arbiter, before the fork)
waiting = mp.RawValue("i", 0)  # shared with the forked workers


def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
    waiting.value += 1
    with MODEL_LOCK:
        body = b'{"text": "never"}'
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


if __name__ == "__main__":
    serve(app, ready=lambda: waiting.value >= 2, clients=("/generate", 4))
