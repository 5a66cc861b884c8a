"""deadlocked: a FastAPI endpoint under real uvicorn awaits an ``asyncio.Event`` nobody will
ever set (the result a lost backend reply should have delivered); 4 outside clients have sent
their request and wait for the answer with no timeout. The loop itself is healthy - it ticks
every 0.1 s in epoll_wait and would accept new connections - so by CPU and stacks the server
looks idle, but no waiting request can ever complete."""

from __future__ import annotations

import asyncio

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()
reply_arrived = asyncio.Event()  # set by nothing
waiting = [0]


@app.get("/generate")
async def generate() -> dict[str, str]:
    waiting[0] += 1
    await reply_arrived.wait()
    return {"text": "never"}


if __name__ == "__main__":
    serve(app, ready=lambda: waiting[0] >= 4, clients=("/generate", 4))
