"""deadlocked: a ThreadPoolExecutor worker takes the index lock for a refresh and then waits,
untimed, for a `snapshot_ready` Event that the snapshot thread was to set - and that thread
died on an exception at start. The main thread blocks taking the same lock to serve a lookup.
Every thread waits on a lock or event of its own process: the holder is the pool's worker
thread, which should be named as the one holding it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

INDEX_LOCK = threading.Lock()
snapshot_ready = threading.Event()


def take_snapshot() -> None:
    raise OSError("snapshot volume not mounted")  # dies before snapshot_ready.set()


def refresh_index() -> None:
    with INDEX_LOCK:
        snapshot_ready.wait()  # never set: its setter died


def lookup() -> None:
    with INDEX_LOCK:  # blocks for ever: the pool's worker holds it
        pass


def main() -> None:
    threading.Thread(target=take_snapshot, name="snapshot").start()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="indexer")
    pool.submit(refresh_index)
    time.sleep(0.3)
    print("READY", flush=True)
    lookup()


if __name__ == "__main__":
    main()
