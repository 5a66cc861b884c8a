"""slow (the contrast of ``asyncio_result_on_loop``): the same service's start-up coroutine
blocks the loop in ``.result()`` of a thread pool's future while the pool's thread computes
the cache in pure Python - the result comes when it is done."""

from __future__ import annotations

import _loop_result

if __name__ == "__main__":
    _loop_result.run(on_loop=False)
