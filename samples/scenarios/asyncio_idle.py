"""idle: an asyncio TCP service with nothing to do - the event loop sits in epoll, a port
listens, a background task waits on an empty asyncio.Queue."""

from __future__ import annotations

import asyncio


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(await reader.readline())
    await writer.drain()
    writer.close()


async def dispatcher(jobs: asyncio.Queue[str]) -> None:
    while True:
        await jobs.get()


async def main() -> None:
    jobs: asyncio.Queue[str] = asyncio.Queue()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    task = asyncio.create_task(dispatcher(jobs))
    await asyncio.sleep(0.2)
    print("READY", flush=True)
    async with server:
        await server.serve_forever()
    task.cancel()


if __name__ == "__main__":
    asyncio.run(main())
