"""deadlocked: a batch worker whose only output is failure. Its main thread waits to take
`model_lock`; a loader thread holds it while it waits for the `weights_ready` Event that the
downloader thread (dead at start-up, one logged traceback) was to set. A watchdog thread logs
"batch N timed out after 1.0 s; retrying" every second: the log moves, with failures only,
and a thread blocks on the lock in every sample - stuck on what its failures name."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time

model_lock = threading.Lock()
weights_ready = threading.Event()
log = logging.getLogger("batch")


def download() -> None:
    raise ConnectionError("weights bucket unreachable")  # dies: nobody sets weights_ready


def load() -> None:
    with model_lock:
        weights_ready.wait()


def watchdog() -> None:
    batch = 0
    while True:
        time.sleep(1.0)
        batch += 1
        log.warning("batch %d timed out after 1.0 s; retrying", batch)


def main() -> None:
    where = tempfile.mkdtemp(prefix="diag-batch-")
    path = os.path.join(where, "batch.log")
    logging.basicConfig(filename=path, format="%(asctime)s %(levelname)s %(message)s")
    sys.stderr = open(path, "a", buffering=1)  # noqa: SIM115 (the traceback goes there)
    threading.Thread(target=download, name="download", daemon=True).start()
    threading.Thread(target=load, name="loader", daemon=True).start()
    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
    time.sleep(1.5)
    print("READY", flush=True)
    with model_lock:  # the batch loop's first step: never gets the model
        print("never", flush=True)


if __name__ == "__main__":
    main()
