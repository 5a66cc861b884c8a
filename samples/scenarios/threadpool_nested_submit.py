"""deadlocked: each "document" task submits its "chunk" subtasks to the same 2-worker
ThreadPoolExecutor and waits for their results; with two documents in flight both workers
wait for chunks queued behind them (thread starvation). The main thread waits in
``as_completed``. A status thread keeps logging the frozen counts with a new ``elapsed=``
every second ("progress: docs=0/100 chunks=0 elapsed=7s"): the log moves, nothing
progresses - the verdict must not read "progressing: the log grew"."""

from __future__ import annotations

import concurrent.futures as cf
import os
import tempfile
import threading
import time

pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="pool")
done = {"docs": 0, "chunks": 0}


def chunk(doc: int, i: int) -> int:
    time.sleep(0.01)
    done["chunks"] += 1
    return i


def document(doc: int) -> int:
    futs = [pool.submit(chunk, doc, i) for i in range(4)]
    total = sum(f.result() for f in futs)  # waits on chunks queued behind this very task
    done["docs"] += 1
    return total


def progress(log: object, t0: float) -> None:
    """The status thread: its counters froze with the pool, its elapsed time did not."""
    while True:
        line = f"progress: docs={done['docs']}/100 chunks={done['chunks']} "
        log.write(line + f"elapsed={time.time() - t0:.0f}s\n")  # type: ignore[attr-defined]
        time.sleep(1)


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="diag-pool-"), "progress.log")
    log = open(path, "a", buffering=1)  # noqa: SIM115 - held open for the job's life
    t0 = time.time()
    threading.Thread(target=progress, args=(log, t0), daemon=True, name="progress").start()
    futs = [pool.submit(document, d) for d in range(100)]
    time.sleep(2.2)  # a few status lines before the capture: the template's history
    print("READY", flush=True)
    for _ in cf.as_completed(futs):
        pass


if __name__ == "__main__":
    main()
