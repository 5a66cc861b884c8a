"""deadlocked, the loop named as waiting on itself, not "... a task was lost (a worker killed,
e.g. by the OOM killer: check dmesg)": an asyncio service's start-up coroutine calls
``asyncio.run_coroutine_threadsafe(coro, loop).result()`` on the loop's own thread - the
coroutine that would set the future runs on the loop it blocks. Contrast:
``asyncio_result_from_pool`` (the future is a pool thread's, which computes: slow)."""

from __future__ import annotations

import _loop_result

if __name__ == "__main__":
    _loop_result.run(on_loop=True)
