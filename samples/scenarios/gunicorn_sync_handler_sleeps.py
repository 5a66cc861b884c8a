"""slow: real gunicorn, 2 sync workers, whose handler calls a rate-limited upstream that makes
it wait - modelled as a blocking 90 s sleep, inside gunicorn's 120 s request budget. 4 outside
clients wait: 2 inside the sleeping handlers, 2 in the listen backlog. The handlers resume by
themselves; a sync worker serves one request at a time, so every client behind them waits.
The advice is the worker class's (a timeout on the call, more workers or threads), not an
event loop's (there is none in a sync worker)."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any, Callable, Iterable

from _gunicorn import serve

waiting = mp.RawValue("i", 0)  # shared with the forked workers


def wait_for_quota() -> None:
    time.sleep(90)  # the upstream's rate limiter: a blocking wait, no event loop to yield to


def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
    waiting.value += 1
    wait_for_quota()
    body = b'{"text": "late"}'
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


if __name__ == "__main__":
    serve(app, ready=lambda: waiting.value >= 2, clients=("/generate", 4))
