"""idle: a healthy agent daemon with no port - the main thread waits on a stop Event until
SIGTERM, a heartbeat thread sleeps between ticks (every 20 s), a worker thread waits on an
empty job queue. Nothing moves during the capture, and nothing is wrong."""

from __future__ import annotations

import queue
import signal
import threading
import time

stop = threading.Event()
jobs: queue.Queue[str] = queue.Queue()


def heartbeat() -> None:
    while not stop.is_set():
        time.sleep(20)  # report liveness to the scheduler (omitted)


def worker() -> None:
    while True:
        jobs.get()


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    threading.Thread(target=worker, name="worker", daemon=True).start()
    threading.Timer(0.5, lambda: print("READY", flush=True)).start()
    stop.wait()


if __name__ == "__main__":
    main()
