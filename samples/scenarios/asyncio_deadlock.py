"""deadlocked: two asyncio tasks each await a future only the other would resolve (a
request/reply pair that lost its reply) - the event loop sits in epoll with no timer, no port
and no connection: nothing can ever wake it."""

from __future__ import annotations

import asyncio


async def producer(ready: asyncio.Future[int], ack: asyncio.Future[int]) -> None:
    await ack  # waits for the consumer's ack before producing
    ready.set_result(1)


async def consumer(ready: asyncio.Future[int], ack: asyncio.Future[int]) -> None:
    await ready  # waits for the producer before acking
    ack.set_result(1)


async def main() -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[int] = loop.create_future()
    ack: asyncio.Future[int] = loop.create_future()
    tasks = [asyncio.create_task(producer(ready, ack)), asyncio.create_task(consumer(ready, ack))]
    await asyncio.sleep(0.2)
    print("READY", flush=True)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main())
