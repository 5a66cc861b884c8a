"""progressing: a start-up awaits a `ready` asyncio.Event that its warm-up task sets after a
few seconds of real work (hashing in steps, yielding to the loop between them); a heartbeat
task logs `alive` with a counter every 0.5 s meanwhile. Then the job computes and reports each
step. Contrast of asyncio_event_heartbeat: the awaited event is set, the job moves."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile


def crunch(rounds: int) -> bytes:
    digest = b"seed"
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    return digest


async def warm_up(ready: asyncio.Event) -> None:
    for _ in range(40):
        crunch(100_000)
        await asyncio.sleep(0)
    ready.set()


async def heartbeat() -> None:
    beat = 0
    while True:
        beat += 1
        logging.info("alive beat=%d", beat)
        await asyncio.sleep(0.5)


async def main() -> None:
    ready = asyncio.Event()
    tasks = [asyncio.create_task(warm_up(ready)), asyncio.create_task(heartbeat())]
    print("READY", flush=True)
    await ready.wait()
    step = 0
    while True:
        step += 1
        crunch(200_000)
        logging.info("step %d done", step)
        await asyncio.sleep(0.1)
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
