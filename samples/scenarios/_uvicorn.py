"""A FastAPI app served by real uvicorn (h11, asyncio loop) on a port of its own, the way
`uvicorn app:app --no-access-log` runs one: the server's loop in the main thread."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Callable, Optional, Tuple

import uvicorn
from _http_clients import start_detached


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def serve(
    app: Any,
    ready: Callable[[], bool] = lambda: True,
    clients: Optional[Tuple[str, int]] = None,
    on_port: Optional[Callable[[int], None]] = None,
) -> None:
    """Serve ``app``; ``clients``: (path, n) - n outside clients looping on GET path. Prints
    READY once the server is up and ``ready()`` holds (e.g. enough requests served)."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    print(f"listening on {port}", flush=True)
    if on_port is not None:
        on_port(port)
    if clients is not None:
        start_detached(port, *clients)  # they queue in the backlog until the loop accepts
    config = uvicorn.Config(app, access_log=False, log_level="warning")
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not (server.started and ready()):
            if task.done():
                task.result()
                raise RuntimeError("uvicorn exited before READY")
            await asyncio.sleep(0.05)
        print("READY", flush=True)
        await task

    asyncio.run(main())
