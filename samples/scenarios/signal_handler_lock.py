"""deadlocked on itself: a metrics shipper's logging handler holds its own (non-reentrant)
batch lock while it flushes; a SIGALRM heartbeat handler logs through the same handler, so
when the alarm lands mid-flush the main thread blocks on a lock a frame lower on its own stack
holds. The interval timer keeps firing: each firing runs the handler again inside the blocked
acquire and blocks again, one set of handler frames deeper. Nothing else runs; to CPU and the
kernel it is a process asleep on a futex that wakes on a timer."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
import time

log = logging.getLogger("shipper")


class BatchShippingHandler(logging.Handler):
    """Appends records to a batch file and ships it; its lock is a plain Lock."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._batch_lock = threading.Lock()
        self._out = open(path, "a")  # noqa: SIM115 - lives as long as the handler

    def emit(self, record: logging.LogRecord) -> None:
        with self._batch_lock:
            self._out.write(self.format(record) + "\n")
            self._ship()

    def _ship(self) -> None:
        self._out.flush()
        time.sleep(0.2)  # the upload: the lock is held for most of the loop's time


def on_alarm(signum: int, frame: object) -> None:
    log.info("heartbeat")


def _watch(progress: list) -> None:  # type: ignore[type-arg]
    """Print READY once the main loop has stopped advancing (then exit: no extra thread)."""
    last, still = -1, 0
    while still < 3:
        time.sleep(0.5)
        still = still + 1 if progress[0] == last else 0
        last = progress[0]
    print("READY", flush=True)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-shipper-"), "batch.log")
    log.addHandler(BatchShippingHandler(path))
    log.setLevel(logging.INFO)
    progress = [0]
    threading.Thread(target=_watch, args=(progress,), daemon=True).start()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        progress[0] += 1
        log.info("step %d", progress[0])
    sys.exit(0)


if __name__ == "__main__":
    main()
