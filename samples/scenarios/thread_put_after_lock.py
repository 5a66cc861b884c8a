"""progressing (the contrast of ``thread_put_holding_lock``): the same threads, the producer
releasing ``stats_lock`` before its ``Queue.put`` - the consumer drains the queue and logs."""

from __future__ import annotations

import _put_under_lock

if __name__ == "__main__":
    _put_under_lock.run(put_under_lock=False)
