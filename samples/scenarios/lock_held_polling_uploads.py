"""deadlocked: a checkpoint coordinator takes the run's ``state_lock`` to snapshot its
counters, starts one upload thread per shard and, still holding the lock, waits for them by
polling ``any(t.is_alive() ...)`` with a 0.4 s sleep, logging nothing. Each upload ends by
recording its result under ``state_lock``: the four upload threads block on it, untimed. The
coordinator's timer wakes it twice a second; each time it finds them alive and sleeps again -
it cannot release the lock they need.

``run(release=True)`` (lock_released_polling_uploads.py): the contrast - the coordinator
snapshots under the lock and releases it before polling: the uploads record their results and
finish, and the coordinator starts the next round.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time

state_lock = threading.Lock()
results: dict = {}  # type: ignore[type-arg]


def upload(shard: int) -> str:
    digest = hashlib.sha256(str(shard).encode() * 50_000).hexdigest()
    time.sleep(0.05)
    with state_lock:  # record the result: blocks while the coordinator holds the lock
        results[shard] = digest
    return digest


def rounds(release: bool) -> None:
    log = open(os.path.join(tempfile.mkdtemp(prefix="diag-ckpt-"), "ckpt.log"), "a", buffering=1)  # noqa: SIM115
    for r in range(10**6):
        state_lock.acquire()
        if r == 0 and not release:  # the truth a test checks diag's "held for" against
            print(f"LOCKED at {time.time():.3f}", flush=True)
        snapshot = dict(results)
        uploads = [
            threading.Thread(target=upload, args=(r * 100 + s,), name=f"upload-{s}")
            for s in range(4)
        ]
        for t in uploads:
            t.start()
        if release:
            state_lock.release()
        while any(t.is_alive() for t in uploads):
            time.sleep(0.4)
        if not release:
            state_lock.release()
        log.write(f"checkpoint round {r}: {len(snapshot)} shards recorded\n")


def run(release: bool) -> None:
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    rounds(release)


if __name__ == "__main__":
    run(release=False)
