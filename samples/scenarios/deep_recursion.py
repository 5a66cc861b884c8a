"""slow (a contrast of signal_handler_lock): a legitimately recursive function - an exhaustive
search over a tree, a few hundred frames deep, the same function on the stack again and again -
computes at 100% of a core. Recursion is not re-entry across a handler: no self-wait."""

from __future__ import annotations

import sys
import time


def search(depth: int, limit: int, acc: int) -> int:
    """Walks a binary tree to ``limit`` levels; the deep frames are the same function."""
    if depth >= limit:
        return acc ^ depth
    total = 0
    for branch in (1, 2):
        if depth >= limit - 18 or branch == 1:
            total += search(depth + 1, limit, (acc * 31 + branch) % 1000003)
    return total


def main() -> None:
    sys.setrecursionlimit(10_000)
    started = time.monotonic()
    printed = False
    while time.monotonic() - started < 600:
        search(0, 318, 7)
        if not printed:
            print("READY", flush=True)
            printed = True


if __name__ == "__main__":
    main()
