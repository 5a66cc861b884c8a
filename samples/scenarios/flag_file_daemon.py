"""idle: a daemon with no port waits for a flag file - every second it checks whether the file
exists (it would run the job it names, then delete it), logs ``alive tick=N`` and sleeps. One
thread, no socket, no signal handler, its log growing by one liveness line a second: the
picture of ``thread_event_heartbeat`` (deadlocked), but nothing here waits on the process's own
code - the only thread sleeps on its own timer, and each wake is the poll itself. What it
checks (a file) diag cannot see, so its wakes may end the wait: idle, never "kill it".

``main(thread=True)`` (flag_file_daemon_thread.py): the same loop in a thread the main thread
starts and joins - a join waits for a live thread of its own, the one that wakes: idle too."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time


def main(thread: bool = False) -> None:
    if thread:
        poller = threading.Thread(target=poll_flag, name="poller")
        poller.start()
        poller.join()
    else:
        poll_flag()


def poll_flag() -> None:
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
