"""idle: a FastAPI app under real uvicorn, access log off, no traffic - the loop sits in
epoll_wait (woken by uvicorn's 0.1 s tick), the port listens, nothing is connected."""

from __future__ import annotations

from _uvicorn import serve
from fastapi import FastAPI

app = FastAPI()


@app.get("/generate")
async def generate() -> dict[str, str]:
    return {"text": "ok"}


if __name__ == "__main__":
    serve(app)
