"""A FastAPI app for the real ``uvicorn`` CLI (``python -m uvicorn ps_uvicorn_app:app --port
P``), as a model server's front end is run. uvicorn binds its port after the app's start-up, so
a thread prints READY once a connection to PS_APP_PORT succeeds."""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator

from fastapi import FastAPI


def _announce(port: int) -> None:
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            time.sleep(0.05)
            continue
        print("READY", flush=True)
        return


@asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    threading.Thread(target=_announce, args=(int(os.environ["PS_APP_PORT"]),), daemon=True).start()
    yield


app = FastAPI(lifespan=lifespan)


@app.get("/generate")
async def generate() -> dict[str, str]:
    return {"text": "ok"}
