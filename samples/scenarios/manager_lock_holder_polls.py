"""idle: the contrast of manager_lock_orphaned with a live holder - a publisher worker takes
the job's shared Manager Lock on its index and, holding it, waits for the upstream job's
``_SUCCESS`` marker, checking for the file every second; a reader worker blocks in
``lock.acquire()`` (its proxy call waits on the manager, whose thread serving it waits on the
lock). The parent joins both. The kernel shows what the orphaned lock shows - waiters on the
manager, its thread on the lock, one other client asleep on a timer - but that client is a
worker, not the waiters' parent polling them: it may hold the lock and release it at the wake
that finds the file. Idle, the poller named; never "kill it"."""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from multiprocessing.managers import SyncManager
from typing import Any


def publish(lock: Any, marker: str) -> None:
    with lock:  # the index stays consistent while the new shards land
        while not os.path.exists(marker):
            time.sleep(1.0)
        print("publishing the new shards", flush=True)


def read_index(lock: Any) -> None:
    with lock:
        print("index read", flush=True)


def main() -> None:
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-publish-")
    marker = os.path.join(where, "_SUCCESS")
    manager = SyncManager()
    manager.start()
    lock = manager.Lock()
    publisher = mp.Process(target=publish, args=(lock, marker), name="publisher")
    publisher.start()
    time.sleep(0.5)
    reader = mp.Process(target=read_index, args=(lock,), name="reader")
    reader.start()
    time.sleep(1.0)
    print("READY", flush=True)
    publisher.join()
    reader.join()


if __name__ == "__main__":
    main()
