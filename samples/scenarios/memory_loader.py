"""slow: a loader filling an in-memory cache - RSS climbs ~100 MB/s at modest CPU, nothing is
printed, the stack sits in one function. Memory growth is work, not a hang."""

from __future__ import annotations

import time
from typing import List

CHUNK_BYTES = 48 << 20
CAP_BYTES = 3 << 30  # stops growing after ~30 s; a capture sees it grow


def build_cache() -> None:
    cache: List[bytearray] = []
    print("READY", flush=True)
    while True:
        if len(cache) * CHUNK_BYTES < CAP_BYTES:
            chunk = bytearray(CHUNK_BYTES)
            chunk[::4096] = b"\x01" * (CHUNK_BYTES // 4096)  # touch every page: resident
            cache.append(chunk)
        time.sleep(0.5)


if __name__ == "__main__":
    build_cache()
