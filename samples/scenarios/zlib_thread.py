"""slow: one thread inside a long C call that releases the GIL (zlib level 9 over 256 MB) while
the main thread waits for it in ``Future.result`` - one unchanged stack, 100% CPU: busy."""

from __future__ import annotations

import concurrent.futures as cf
import os
import zlib


def pack_shard(data: bytes) -> int:
    total = 0
    for _ in range(1000):
        total += len(zlib.compress(data, 9))
    return total


def main() -> None:
    data = os.urandom(1 << 20) * 256  # 256 MB: seconds per compress call
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(pack_shard, data)
        print("READY", flush=True)
        print(future.result())


if __name__ == "__main__":
    main()
