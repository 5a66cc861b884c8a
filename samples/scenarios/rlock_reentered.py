"""progressing (the contrast of signal_handler_lock): the same shipper, but its batch lock is
an RLock - re-entered by design when the SIGALRM heartbeat logs mid-flush, so the handler
runs to completion on top of the interrupted emit and the loop goes on writing batches."""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
import time

log = logging.getLogger("shipper")


class ReentrantShippingHandler(logging.Handler):
    def __init__(self, path: str) -> None:
        super().__init__()
        self._batch_lock = threading.RLock()
        self._out = open(path, "a")  # noqa: SIM115 - lives as long as the handler

    def emit(self, record: logging.LogRecord) -> None:
        with self._batch_lock:
            self._out.write(self.format(record) + " " + "x" * 200 + "\n")
            self._ship()

    def _ship(self) -> None:
        self._out.flush()
        time.sleep(0.05)


def on_alarm(signum: int, frame: object) -> None:
    log.info("heartbeat")


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-shipper-"), "batch.log")
    log.addHandler(ReentrantShippingHandler(path))
    log.setLevel(logging.INFO)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.3, 0.3)
    deadline = time.monotonic() + 600
    step = 0
    while time.monotonic() < deadline:
        step += 1
        log.info("step %d", step)
        if step == 20:
            print("READY", flush=True)


if __name__ == "__main__":
    main()
