"""slow: an ``async def`` FastAPI endpoint under real uvicorn calls the blocking
``time.sleep`` (a sync client or a sync sleep left in an async handler): the event loop's
thread sleeps inside the handler, so every client waits - the one in the handler and the ones
queued behind it - until the call returns, and then the server goes on. By its unanswered
requests it looks deadlocked ("restart it"); a restart fixes nothing - the call must move off
the loop. Contrast: ``uvicorn_handler_hangs`` awaits an event nobody sets (deadlocked)."""

from __future__ import annotations

import time

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()
entered = [0]


@app.get("/generate")
async def generate() -> dict[str, str]:
    entered[0] += 1
    if entered[0] == 1:
        # The loop that would print READY is the one about to block: say it from here.
        print("READY", flush=True)
    time.sleep(600)  # blocks the event loop: the bug this scenario shows
    return {"text": "late"}


if __name__ == "__main__":
    serve(app, ready=lambda: False, clients=("/generate", 4))
