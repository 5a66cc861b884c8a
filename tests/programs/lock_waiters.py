"""Threads blocked on locks: N waiters on lock A, M on lock B, main thread asleep.

Prints ``READY <json>`` (the native thread ids per lock) once every waiter is in a futex
wait, as the kernel reports it, so the test observes the blocked state and not a race.
"""

from __future__ import annotations

import json
import sys
import threading
import time


def in_futex(tid: int) -> bool:
    try:
        with open(f"/proc/self/task/{tid}/wchan") as fh:
            return fh.read().startswith("futex")
    except OSError:
        return False


def main() -> None:
    n_a = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    n_b = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    lock_a, lock_b = threading.Lock(), threading.Lock()
    lock_a.acquire()
    lock_b.acquire()
    tids: dict = {"a": [], "b": []}
    ready = threading.Lock()

    def waiter(lock: threading.Lock, key: str) -> None:
        with ready:
            tids[key].append(threading.get_native_id())
        lock.acquire()

    threads = [
        threading.Thread(target=waiter, args=(lock_a, "a"), name=f"wait-a-{i}", daemon=True)
        for i in range(n_a)
    ] + [
        threading.Thread(target=waiter, args=(lock_b, "b"), name=f"wait-b-{i}", daemon=True)
        for i in range(n_b)
    ]
    for t in threads:
        t.start()
    while len(tids["a"]) + len(tids["b"]) < n_a + n_b or not all(
        in_futex(tid) for tid in tids["a"] + tids["b"]
    ):
        time.sleep(0.01)
    print("READY " + json.dumps(tids), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
