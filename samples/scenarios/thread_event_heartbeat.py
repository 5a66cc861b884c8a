"""deadlocked: the main thread waits on a `loaded` threading.Event that the loader thread was
to set, and the loader died on an exception; a watchdog thread logs `alive tick=N` every
0.5 s. No port, no connection, no signal handler: only the process's own threads could set the
event, and the only one that runs only reports it lives."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time

loaded = threading.Event()


def loader() -> None:
    raise FileNotFoundError("weights.bin")  # dies before loaded.set()


def watchdog() -> None:
    tick = 0
    while True:
        tick += 1
        logging.info("alive tick=%d", tick)
        time.sleep(0.5)


def main() -> None:
    log_dir = tempfile.mkdtemp(prefix="diag-thread-")
    logging.basicConfig(
        filename=os.path.join(log_dir, "worker.log"),
        level=logging.INFO,
        format="%(asctime)s %(threadName)s %(message)s",
    )
    threading.Thread(target=loader, name="loader").start()
    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
    time.sleep(0.3)
    print("READY", flush=True)
    loaded.wait()


if __name__ == "__main__":
    main()
