"""A target for the stacks tests: known threads in known states, then READY.

- two ``lock_waiter`` threads blocked acquiring a lock the main thread holds;
- an ``idle_event_waiter`` thread parked on an Event;
- a thread whose name has odd characters (quotes, a paren, unicode, a tab);
- the main thread in ``time.sleep`` inside ``main_sleeper``.

Prints ``READY <tid of each thread as name=tid>`` so a test can check the OS-thread join.
Works on Python 3.9+ (threading.get_native_id).
"""

from __future__ import annotations

import sys
import threading
import time

LOCK = threading.Lock()
EVENT = threading.Event()
ODD_NAME = 'odd "name") \u00e9\u2603\tend'


def lock_waiter() -> None:
    with LOCK:
        pass


def idle_event_waiter() -> None:
    EVENT.wait()


def odd_thread_body() -> None:
    EVENT.wait()


def main_sleeper(seconds: float) -> None:
    time.sleep(seconds)


def _state(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def wait_until_parked(threads: list[threading.Thread]) -> None:
    """READY only once every waiter sleeps inside its target function (not at the barrier)."""
    targets = {"lock_waiter", "wait"}
    for _ in range(2000):
        frames = sys._current_frames()
        parked = all(
            t.ident in frames
            and frames[t.ident].f_code.co_name in targets
            and _state(t.native_id or 0) == "S"
            for t in threads
        )
        if parked:
            return
        time.sleep(0.005)
    raise SystemExit("waiters never parked")


def main() -> None:
    LOCK.acquire()
    tids = {}
    ready = threading.Barrier(5)

    def wrap(fn):  # type: ignore[no-untyped-def]
        def run() -> None:
            tids[threading.current_thread().name] = threading.get_native_id()
            ready.wait()
            fn()

        return run

    threads = [
        threading.Thread(target=wrap(lock_waiter), name="lock_waiter_1", daemon=True),
        threading.Thread(target=wrap(lock_waiter), name="lock_waiter_2", daemon=True),
        threading.Thread(target=wrap(idle_event_waiter), name="idle_event_waiter", daemon=True),
        threading.Thread(target=wrap(odd_thread_body), name=ODD_NAME, daemon=True),
    ]
    for t in threads:
        t.start()
    ready.wait()
    tids["MainThread"] = threading.get_native_id()
    wait_until_parked(threads)
    print("READY " + " ".join(f"{n!r}={t}" for n, t in tids.items()), flush=True)
    main_sleeper(600)


if __name__ == "__main__":
    main()
