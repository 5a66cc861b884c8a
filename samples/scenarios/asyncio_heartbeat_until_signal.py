"""idle: a daemon that runs until it is told to stop - its main task awaits a `stop` asyncio
Event that a SIGTERM handler (``loop.add_signal_handler``) sets, while a heartbeat task logs
`alive beat=N` every 0.5 s. No port, no connection: a signal is its door. Contrast of
asyncio_event_heartbeat: the same wait and the same beat, but something outside can end it."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile


async def heartbeat() -> None:
    beat = 0
    while True:
        beat += 1
        logging.info("alive beat=%d", beat)
        await asyncio.sleep(0.5)


async def main() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    task = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.2)
    print("READY", flush=True)
    await stop.wait()
    task.cancel()


if __name__ == "__main__":
    log_dir = tempfile.mkdtemp(prefix="diag-asyncio-")
    logging.basicConfig(
        filename=os.path.join(log_dir, "daemon.log"),
        level=logging.INFO,
        format="%(asctime)s %(message)s",
    )
    asyncio.run(main())
