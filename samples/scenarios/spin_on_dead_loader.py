"""deadlocked: a tokenizer service starts a ``prefetch`` thread that loads its vocabulary and
then flips ``loader.ready``; the main thread spins on ``while not loader.ready: pass`` before
serving. The vocabulary file is missing: the thread dies at once with one traceback
("Exception in thread prefetch: ... FileNotFoundError") in the service's log, and the main
thread spins at 100% of a core on the same line for ever. No poll frame shows: it is plain
Python.

``run(vocab_ok=True)`` (spin_until_loaded.py): the contrast - the vocabulary is there but slow
to read (a few seconds); the same spin ends during the capture and the service logs its
batches.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time


class Loader:
    def __init__(self, path: str, slow_s: float) -> None:
        self.path, self.slow_s, self.ready, self.vocab = path, slow_s, False, {}

    def prefetch(self) -> None:
        time.sleep(self.slow_s)
        with open(self.path) as f:  # missing: FileNotFoundError, the thread dies
            self.vocab = {w.strip(): i for i, w in enumerate(f)}
        self.ready = True


def wait_until_ready(loader: Loader) -> None:
    while not loader.ready:
        pass


def run(vocab_ok: bool) -> None:
    work = tempfile.mkdtemp(prefix="diag-vocab-")
    log = open(os.path.join(work, "service.log"), "a", buffering=1)  # noqa: SIM115
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(log.fileno(), 2)  # tracebacks (threading's excepthook) go to the service's log
    path = os.path.join(work, "vocab.txt")
    if vocab_ok:
        with open(path, "w") as f:
            f.write("\n".join(f"w{i}" for i in range(50_000)))
    loader = Loader(path, slow_s=4.0 if vocab_ok else 0.0)
    threading.Thread(target=loader.prefetch, name="prefetch", daemon=True).start()
    time.sleep(0.5)
    print("READY", file=ready_out, flush=True)
    wait_until_ready(loader)
    for batch in range(10**9):
        tokens = sum(loader.vocab.get(f"w{(batch * 7 + i) % 50_000}", 0) for i in range(2000))
        print(f"batch {batch}: {tokens} token ids", file=log)
        time.sleep(0.1)


if __name__ == "__main__":
    run(vocab_ok=len(sys.argv) > 1)
