"""idle or slow, never deadlocked: a metrics-uploader thread holds the shared ``client_lock``
while it backs off (``time.sleep(20)`` after a 429); three loader threads and the main loop
block on that lock, untimed. When the sleep ends the lock is released and all go on. By its
stacks: every thread but one waits on one lock - the picture of a lock nobody releases."""

from __future__ import annotations

import threading
import time

client_lock = threading.Lock()


def uploader() -> None:
    while True:
        with client_lock:
            print("upload got 429 Too Many Requests; backing off 20 s", flush=True)
            time.sleep(20)
        time.sleep(0.1)


def loader() -> None:
    while True:
        with client_lock:
            pass
        time.sleep(0.05)


if __name__ == "__main__":
    threading.Thread(target=uploader, name="uploader", daemon=True).start()
    time.sleep(0.3)
    for i in range(3):
        threading.Thread(target=loader, name=f"loader-{i}", daemon=True).start()
    print("READY", flush=True)
    while True:
        with client_lock:
            print("main step", flush=True)
        time.sleep(0.05)
