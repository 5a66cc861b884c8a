"""deadlocked: a shutdown that waits on itself. The main thread waits for a `done` Event that
only the consumer thread sets, and the consumer waits on a queue.Queue whose producer thread
already died on an exception. Every thread waits untimed on a lock, queue or event of its own
process (private futexes): no port, no timer, no peer can end any of those waits."""

from __future__ import annotations

import queue
import threading
import time

work: queue.Queue[bytes] = queue.Queue()
done = threading.Event()


def producer() -> None:
    raise ConnectionError("upstream refused")  # dies before putting anything


def consumer() -> None:
    while True:
        item = work.get()  # nothing will ever come
        if not item:
            done.set()
            return


def main() -> None:
    t = threading.Thread(target=producer, name="producer")
    t.start()
    t.join()
    threading.Thread(target=consumer, name="consumer", daemon=True).start()
    time.sleep(0.3)
    print("READY", flush=True)
    done.wait()


if __name__ == "__main__":
    main()
