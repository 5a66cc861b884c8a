"""A producer thread feeds a bounded ``queue.Queue`` (2 items) that a consumer thread drains;
both take ``stats_lock`` to count; the main thread is a status loop that only sleeps. The
consumer logs every 50 items. READY once the state under test holds."""

from __future__ import annotations

import logging
import os
import queue
import signal
import tempfile
import threading
import time

LIFETIME_S = 600  # SIGALRM's default action ends the process then, whatever happens


def run(put_under_lock: bool) -> None:
    signal.alarm(LIFETIME_S)
    logging.basicConfig(
        filename=os.path.join(tempfile.mkdtemp(prefix="diag-putlock-"), "pipeline.log"),
        level=logging.INFO,
        format="%(asctime)s %(message)s",
    )
    items: queue.Queue[int] = queue.Queue(maxsize=2)
    stats_lock = threading.Lock()
    counts = {"made": 0, "used": 0}

    def producer() -> None:
        while True:
            if put_under_lock:
                with stats_lock:  # the bug: waits for room while holding the lock
                    items.put(counts["made"])
                    counts["made"] += 1
            else:
                with stats_lock:
                    counts["made"] += 1
                items.put(counts["made"])

    def consumer() -> None:
        time.sleep(0.5)  # starts late: the queue is full by then
        while True:
            with stats_lock:
                counts["used"] += 1
            items.get()
            if counts["used"] % 50 == 0:
                logging.info("consumed %d items", counts["used"])
            time.sleep(0.01)

    threading.Thread(target=producer, name="producer", daemon=True).start()
    threading.Thread(target=consumer, name="consumer", daemon=True).start()
    time.sleep(2.0)
    print("READY", flush=True)
    while True:
        time.sleep(1.0)  # the status loop
