"""idle: ``flag_file_daemon`` written with asyncio - one task checks for a flag file every
second, logs ``alive tick=N`` and awaits ``asyncio.sleep(1)``. Nothing waits on its own code:
the loop's only task is the poll. To the kernel and to py-spy it is ``asyncio_event_heartbeat``
(a task awaiting an Event whose setter died, beside a heartbeat task): the loop in ``select``
on its own wake-up pipe, one timer, liveness lines - an awaiting coroutine is on no stack, and
Python 3.11 has no way to list a loop's tasks from outside. Today it reads deadlocked (the
spec: tests/test_scenarios.py's VERDICT_WRONG_TODAY)."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile


async def poll_flag(flag: str) -> None:
    log = logging.getLogger("daemon")
    tick = 0
    while True:
        if os.path.exists(flag):
            log.info("flag found: running the job")
            os.remove(flag)
        tick += 1
        log.info("alive tick=%d", tick)
        if tick == 1:
            print("READY", flush=True)
        await asyncio.sleep(1)


if __name__ == "__main__":
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-aioflag-")
    logging.basicConfig(
        filename=os.path.join(where, "daemon.log"),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    asyncio.run(poll_flag(os.path.join(where, "run.flag")))
