"""deadlocked: a FastAPI ``async def`` endpoint under real uvicorn calls its own server
synchronously (``urllib`` from the event loop - "fetch my own /health first"). The request
it sends waits in the server's own listen queue, and the only thread that could accept and
answer it is the event loop, blocked in that very read: nothing ever ends it. One outside
client waits on the endpoint. By its stacks the server sits in a socket read behind a
listening port - the picture of a healthy server waiting for work."""

from __future__ import annotations

import threading
import time
import urllib.request

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()
port: list[int] = []
entered = [False]


@app.get("/health")
async def health() -> dict[str, str]:
    return {"ok": "yes"}


@app.get("/generate")
async def generate() -> dict[str, str]:
    entered[0] = True
    with urllib.request.urlopen(f"http://127.0.0.1:{port[0]}/health") as answer:  # blocks the loop
        return {"text": answer.read().decode()}


def _ready_once_blocked() -> None:
    """READY from a thread of its own: the loop that would print it is the one that blocks."""
    while not entered[0]:
        time.sleep(0.05)
    time.sleep(0.3)  # into the read
    print("READY", flush=True)


if __name__ == "__main__":
    threading.Thread(target=_ready_once_blocked, daemon=True).start()
    serve(app, ready=lambda: False, clients=("/generate", 1), on_port=port.append)
