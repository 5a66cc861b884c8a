"""deadlocked: multiprocessing's "joining processes that use queues" pitfall. A child puts a
4 MB result on a ``multiprocessing.Queue`` and returns; the parent ``join()``s it before it
``get()``s. The child cannot exit until its queue feeder thread has flushed the pipe, which
nobody reads: parent in ``join``, child's feeder in a pipe write - a cycle. diag names it and
the fix (get before join)."""

from __future__ import annotations

import multiprocessing as mp
import time


def featurize(q: mp.Queue[bytes]) -> None:
    q.put(b"x" * (4 << 20))  # far more than a pipe holds


if __name__ == "__main__":
    mp.set_start_method("fork")
    q: mp.Queue[bytes] = mp.Queue()
    child = mp.Process(target=featurize, args=(q,), name="featurize")
    child.start()
    time.sleep(0.5)  # the feeder is in its write by now
    print("READY", flush=True)
    child.join()
    print(len(q.get()))
