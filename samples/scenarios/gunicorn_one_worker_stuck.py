"""progressing: real gunicorn, 2 sync workers; the first request a worker takes waits on a
cache fill that never comes (an untimed Event.wait: that worker is stuck for good), while the
other worker answers every other request - 3 outside clients keep getting answers from it.
The server serves; one of its workers is stuck, and the verdict says so as a warning, not
"nothing moves"."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from typing import Any, Callable, Iterable

from _gunicorn import serve

served = mp.Value("i", 0)  # requests taken, across the forked workers (its own lock)
CACHE_FILLED = threading.Event()  # set by a fill thread that was never started


def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
    with served.get_lock():
        served.value += 1
        first = served.value == 1
    if first:
        CACHE_FILLED.wait()  # no timeout: this worker is stuck for good
    time.sleep(0.005)
    body = b'{"text": "ok"}'
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


if __name__ == "__main__":
    serve(app, ready=lambda: served.value >= 20, clients=("/generate", 3))
