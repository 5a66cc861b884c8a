"""deadlocked: two threads take two locks in opposite order (the textbook lock-order
deadlock); the main thread joins them forever."""

from __future__ import annotations

import threading
import time

lock_a = threading.Lock()
lock_b = threading.Lock()
both_hold_one = threading.Barrier(2)


def transfer_a_to_b() -> None:
    with lock_a:
        both_hold_one.wait()
        with lock_b:
            pass


def transfer_b_to_a() -> None:
    with lock_b:
        both_hold_one.wait()
        with lock_a:
            pass


def main() -> None:
    threads = [
        threading.Thread(target=transfer_a_to_b, name="transfer-a-b"),
        threading.Thread(target=transfer_b_to_a, name="transfer-b-a"),
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)
    print("READY", flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
