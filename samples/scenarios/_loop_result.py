"""An asyncio service whose start-up hook ``refresh_cache`` (a coroutine, on the loop's own
thread) calls ``.result()`` on a ``concurrent.futures.Future``: either the one
``asyncio.run_coroutine_threadsafe`` returns for a coroutine of this same loop, or a thread
pool's (a worker thread computes the cache for minutes). The service listens on a port all
the while. READY once the hook is blocked."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import signal
import threading
import time

import _ports

LIFETIME_S = 600  # SIGALRM's default action ends the process then, whatever happens


async def _lookup() -> int:
    return 1


def _compute_cache() -> int:
    deadline, x = time.monotonic() + LIFETIME_S, 0
    while time.monotonic() < deadline:  # pure-Python work in the pool's thread
        x = (x * 31 + 7) % 1000003
    return x


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def _main(on_loop: bool) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", _ports.service_port())
    threading.Timer(1.5, lambda: print("READY", flush=True)).start()
    async with server:
        await refresh_cache(on_loop)
        await server.serve_forever()


async def refresh_cache(on_loop: bool) -> int:
    if on_loop:  # the result needs this very loop: it never comes
        return asyncio.run_coroutine_threadsafe(_lookup(), asyncio.get_running_loop()).result()
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_compute_cache).result()  # blocks the loop while a thread computes


def run(on_loop: bool) -> None:
    signal.alarm(LIFETIME_S)
    asyncio.run(_main(on_loop))
