"""deadlocked: a plain ``def`` FastAPI endpoint under real uvicorn (run in AnyIO's worker
threads) takes the model lock, which the start-up warm-up took and never released (it failed
half-way; the error was logged and swallowed). 4 outside clients wait: 4 worker threads sit in
``Lock.acquire`` with no timeout while the event loop ticks on in epoll_wait."""

from __future__ import annotations

import threading

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()
MODEL_LOCK = threading.Lock()
waiting = [0]


def warm_up() -> None:
    MODEL_LOCK.acquire()
    raise RuntimeError("warm-up failed")  # before the release: the lock stays taken


try:
    warm_up()
except RuntimeError:
    pass  # logged and swallowed in the real thing


@app.get("/generate")
def generate() -> dict[str, str]:
    waiting[0] += 1
    with MODEL_LOCK:
        return {"text": "never"}


if __name__ == "__main__":
    serve(app, ready=lambda: waiting[0] >= 4, clients=("/generate", 4))
