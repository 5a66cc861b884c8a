"""progressing: the contrast to ``stats_heartbeat_stuck`` - the same kind of periodic stats
line, in a wording of its own ("done=41 | queued=3 | tput=812.4 tok/s"), but its counters
move: a worker thread finishes a request every 0.2 s (each a short sleep on a backend, so
no CPU to speak of) and the line reports the new count. New counts are progress, whatever
the wording."""

from __future__ import annotations

import os
import tempfile
import threading
import time

done = [0]


def worker() -> None:
    while True:
        time.sleep(0.2)  # the backend call
        done[0] += 1


def print_stats(log: object) -> None:
    while True:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        tput = 5.0 * 160 + done[0] % 7
        log.write(f"[frontend] {stamp} | done={done[0]} | queued=3 | tput={tput:.1f} tok/s\n")  # type: ignore[attr-defined]
        time.sleep(0.5)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-stats-"), "frontend.log")
    log = open(path, "a", buffering=1)  # noqa: SIM115 - held open for the job's life
    threading.Thread(target=worker, daemon=True).start()
    threading.Thread(target=print_stats, args=(log,), daemon=True).start()
    time.sleep(1.2)
    print("READY", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
