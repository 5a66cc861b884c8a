"""idle: the main task awaits a `ready` asyncio.Event whose setter task died, while a silent
task wakes every 0.5 s to refresh an in-memory timestamp - nothing logged. The loop watches
only its own wake-up pipe: only its own timers can wake it, as for a loop that polls a file
or a clock. The capture cannot tell those apart (no liveness line, no work): idle, with the
evidence that would tell (a watch, a liveness line) - the ambiguous half of
asyncio_event_heartbeat."""

from __future__ import annotations

import asyncio
import time

last_seen = [0.0]


async def warm_up(ready: asyncio.Event) -> None:
    await asyncio.sleep(0.05)
    raise RuntimeError("model file missing")  # dies before ready.set()


async def keep_time() -> None:
    while True:
        last_seen[0] = time.monotonic()
        await asyncio.sleep(0.5)


async def main() -> None:
    ready = asyncio.Event()
    tasks = [asyncio.create_task(warm_up(ready)), asyncio.create_task(keep_time())]
    await asyncio.sleep(0.2)
    print("READY", flush=True)
    await ready.wait()
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
