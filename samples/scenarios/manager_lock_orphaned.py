"""deadlocked: a multiprocessing Manager's Lock whose holder was killed. A worker takes the
shared lock (a proxy call into the manager's server process) and dies by SIGKILL before
releasing it; the manager keeps the lock held - its server never releases a lock for a client
that went away. Two more workers then block in `lock.acquire()`: each proxy call waits on its
connection for the manager's answer, and the manager's thread serving it waits on the lock,
untimed. The parent polls on a timer until the workers are done. Only the dead worker could
release it."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from multiprocessing.managers import SyncManager
from typing import Any


def update_shared_index(lock: Any, taken: Any) -> None:
    lock.acquire()
    taken.set()
    time.sleep(3600)  # killed here, holding the lock


def append_record(lock: Any, n: int) -> None:
    with lock:  # blocks for ever: the holder died
        print(f"record {n}", flush=True)


def main() -> None:
    manager = SyncManager()
    manager.start()
    lock = manager.Lock()
    taken = manager.Event()
    holder = mp.Process(target=update_shared_index, args=(lock, taken), name="indexer")
    holder.start()
    taken.wait()
    os.kill(holder.pid, signal.SIGKILL)
    holder.join()
    writers = [mp.Process(target=append_record, args=(lock, n), name=f"writer-{n}") for n in (1, 2)]
    for w in writers:
        w.start()
    time.sleep(0.5)
    print("READY", flush=True)
    while any(w.is_alive() for w in writers):  # the parent polls its workers
        time.sleep(0.5)
    manager.shutdown()


if __name__ == "__main__":
    main()
