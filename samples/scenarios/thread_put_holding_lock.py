"""deadlocked, not "idle: it wakes on a timer": a producer thread waits in ``Queue.put`` for room
in a full bounded queue while holding ``stats_lock``; the consumer, the only thread that would
make room, blocks taking ``stats_lock``; the main thread's status loop only sleeps. Its timer
wakes cannot end either wait. Contrast: ``thread_put_after_lock`` (the producer puts after
releasing the lock: the pipeline runs)."""

from __future__ import annotations

import _put_under_lock

if __name__ == "__main__":
    _put_under_lock.run(put_under_lock=True)
