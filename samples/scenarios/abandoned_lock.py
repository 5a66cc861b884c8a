"""deadlocked: a lock left held by a thread that died (``acquire`` without ``finally``); the
thread that needs it next blocks forever, the main thread joins it, and the pool's other
threads wait on an empty queue. One lock, no cycle - still nothing can ever move."""

from __future__ import annotations

import queue
import threading
import time

cache_lock = threading.Lock()
jobs: queue.Queue[int] = queue.Queue()


def refresh_cache() -> None:
    cache_lock.acquire()
    raise RuntimeError("cache backend unreachable")  # dies holding the lock


def flush_cache() -> None:
    with cache_lock:  # blocks forever
        pass


def idle_worker() -> None:
    while True:
        jobs.get()


def main() -> None:
    for k in range(3):
        threading.Thread(target=idle_worker, name=f"io-{k}", daemon=True).start()
    dying = threading.Thread(target=refresh_cache, name="refresher")
    dying.start()
    dying.join()
    flusher = threading.Thread(target=flush_cache, name="flusher")
    flusher.start()
    time.sleep(0.5)
    print("READY", flush=True)
    flusher.join()


if __name__ == "__main__":
    main()
