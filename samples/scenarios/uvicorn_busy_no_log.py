"""progressing: a FastAPI app under real uvicorn answers a steady stream of requests from 4
outside clients, with the access log off - each request awaits a 20 ms backend call
(``asyncio.sleep``) and serializes a small JSON answer. Nothing is written to a file or a log
(the answers go out with send(), so /proc/PID/io wchar stays ~0), the CPU is modest and the
loop is mostly in epoll_wait between requests: only the sockets show the work."""

from __future__ import annotations

import asyncio

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()
served = [0]


@app.get("/generate")
async def generate() -> dict[str, object]:
    await asyncio.sleep(0.02)  # the backend call
    served[0] += 1
    return {"text": "ok " * 64, "n": served[0]}


if __name__ == "__main__":
    serve(app, ready=lambda: served[0] >= 50, clients=("/generate", 4))
