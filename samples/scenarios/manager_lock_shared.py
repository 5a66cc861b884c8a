"""progressing: the contrast of manager_lock_orphaned - the same Manager Lock shared by three
workers, each of which takes it, appends a record to the job's log and releases it, again and
again. The workers wait on the manager for the lock in turn; the manager's serving threads
wait on the lock while another worker holds it: the lock moves, the log grows."""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from multiprocessing.managers import SyncManager
from typing import Any


def append_records(lock: Any, n: int, path: str) -> None:
    i = 0
    with open(path, "a", buffering=1) as log:  # held open, line-buffered: the job's log
        while True:
            i += 1
            with lock:
                log.write(f"writer {n} appended record {i}\n")
                time.sleep(0.05)
            time.sleep(0.1)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-manager-"), "records.log")
    manager = SyncManager()
    manager.start()
    lock = manager.Lock()
    workers = [
        mp.Process(target=append_records, args=(lock, n, path), name=f"writer-{n}")
        for n in (1, 2, 3)
    ]
    for w in workers:
        w.start()
    time.sleep(0.5)
    print("READY", flush=True)
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
