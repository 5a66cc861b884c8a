"""deadlocked: a front end keeps printing its stats line twice a second - its own wording,
no framework's ("tput=0.0 tok/s | active=4 | queued=11 | kv_used=37.5%") - while its 3 gloo
ranks are stuck in mismatched collectives (ranks 0,1 in all_reduce, rank 2 in barrier). The
log grows, but every line repeats one template with the same numbers: a heartbeat, not
progress - the verdict must not read "progressing: the log grew"."""

from __future__ import annotations

import os
import tempfile
import threading
import time

import _gloo
from gloo_mismatched_collective import WORLD_SIZE, main  # the same ranks, stuck the same way


def print_stats(path: str) -> None:
    """The front end's periodic stats line: its counters froze when the engine stuck."""
    with open(path, "a", buffering=1) as log:
        while True:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"[frontend] {stamp} | tput=0.0 tok/s | active=4 | queued=11 | "
                      "kv_used=37.5%\n")  # fmt: skip
            time.sleep(0.5)


def start_stats() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-stats-"), "frontend.log")
    threading.Thread(target=print_stats, args=(path,), daemon=True).start()
    time.sleep(1.2)  # a few lines before the capture: the template's history


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE, on_ready=start_stats)
    else:
        main()
