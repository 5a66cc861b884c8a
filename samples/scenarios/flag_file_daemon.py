"""idle: a daemon with no port waits for a flag file - every second it checks whether the file
exists (it would run the job it names, then delete it), logs ``alive tick=N`` and sleeps. One
thread, no socket, no signal handler, its log growing by one liveness line a second: the
picture of ``thread_event_heartbeat`` (deadlocked), but nothing here waits on the process's own
code - the only thread sleeps on its own timer, and each wake is the poll itself. What it
checks (a file) diag cannot see, so its wakes may end the wait: idle, never "kill it"."""

from __future__ import annotations

import logging
import os
import tempfile
import time


def main() -> None:
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-flagd-")
    flag = os.path.join(where, "run.flag")
    logging.basicConfig(
        filename=os.path.join(where, "daemon.log"),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
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
        time.sleep(1)


if __name__ == "__main__":
    main()
