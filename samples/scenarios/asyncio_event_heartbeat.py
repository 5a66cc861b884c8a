"""deadlocked: a service's start-up awaits a `ready` asyncio.Event that only its warm-up task
would set, and the warm-up task died on an exception (logged by the loop only at exit). A
heartbeat task keeps the event loop waking every 0.5 s and logs `alive` with a counter. The
loop has no listening socket and no connection: the only things that can ever wake it are its
own timers, and the only timer is the heartbeat's, which never sets the event."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile


async def warm_up(ready: asyncio.Event) -> None:
    await asyncio.sleep(0.05)
    raise RuntimeError("model file missing")  # dies before ready.set()


async def heartbeat() -> None:
    beat = 0
    while True:
        beat += 1
        logging.info("alive beat=%d", beat)
        await asyncio.sleep(0.5)


async def main() -> None:
    ready = asyncio.Event()
    tasks = [asyncio.create_task(warm_up(ready)), asyncio.create_task(heartbeat())]
    await asyncio.sleep(0.2)
    print("READY", flush=True)
    await ready.wait()  # never set: the only setter died
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    log_dir = tempfile.mkdtemp(prefix="diag-asyncio-")
    logging.basicConfig(
        filename=os.path.join(log_dir, "service.log"),
        level=logging.INFO,
        format="%(asctime)s %(message)s",
    )
    asyncio.run(main())
