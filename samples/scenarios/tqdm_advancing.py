"""progressing: scoring a dataset item by item through a slow remote-style call (a 0.25 s
blocking wait per item, CPU near zero), a tqdm bar redrawn in place in the job's log
(``\\r``, no new line) - the only output. The bar has 100,000 items: it reads 0% all along
while its n goes 14 -> 22 -> 30. The items done are the progress, not the percentage."""

from __future__ import annotations

import os
import tempfile
import threading

from tqdm import tqdm


def score(i: int) -> int:
    ev = threading.Event()
    timer = threading.Timer(0.25, ev.set)  # the remote call's answer
    timer.start()
    ev.wait()
    return i % 7


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-tqdm-"), "score.log")
    log = open(path, "a", buffering=1)  # noqa: SIM115 - held open for the job's life
    total = 0
    for i in tqdm(range(100_000), desc="scoring", file=log, mininterval=0.5):
        total += score(i)
        if i == 8:
            print("READY", flush=True)


if __name__ == "__main__":
    main()
