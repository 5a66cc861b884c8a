"""progressing: a pure-Python job that prints a progress line per batch to stdout (a pipe,
not a log file) while its stack moves between batches."""

from __future__ import annotations

import time


def tokenize(batch: int) -> int:
    return sum(len(str(i * batch)) for i in range(20_000))


def main() -> None:
    print("READY", flush=True)
    for batch in range(10**9):
        tokens = tokenize(batch)
        print(f"batch {batch}: {tokens} tokens", flush=True)
        time.sleep(0.1)


if __name__ == "__main__":
    main()
