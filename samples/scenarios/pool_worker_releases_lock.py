"""progressing: the contrast of pool_worker_holds_lock - the same ThreadPoolExecutor worker
takes the index lock and waits for `snapshot_ready`, but the snapshot thread sets it after a
second of work; the worker releases the lock and the main thread's lookups go on, each logged."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

INDEX_LOCK = threading.Lock()
snapshot_ready = threading.Event()


def take_snapshot() -> None:
    time.sleep(1.0)  # the snapshot is written, then announced
    snapshot_ready.set()


def refresh_index() -> None:
    with INDEX_LOCK:
        snapshot_ready.wait()


def main() -> None:
    log_dir = tempfile.mkdtemp(prefix="diag-index-")
    logging.basicConfig(
        filename=os.path.join(log_dir, "index.log"), level=logging.INFO, format="%(message)s"
    )
    threading.Thread(target=take_snapshot, name="snapshot").start()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="indexer")
    pool.submit(refresh_index)
    time.sleep(0.3)
    print("READY", flush=True)
    n = 0
    while True:
        with INDEX_LOCK:
            n += 1
            logging.info("lookup %d served", n)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
