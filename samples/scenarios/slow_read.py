"""slow: loading a big file from throttled storage - read bytes rise steadily, CPU stays low,
the log is silent. Looks idle by CPU, is not."""

from __future__ import annotations

import os
import tempfile
import time

CHUNK_BYTES = 1 << 20
RATE_BYTES_PER_S = 8 << 20


def make_weights_file() -> str:
    fd, path = tempfile.mkstemp(prefix="diag-weights-", suffix=".bin")
    with os.fdopen(fd, "wb") as fh:
        fh.write(os.urandom(1 << 20) * 32)  # 32 MB, re-read in a loop
    return path


def read_shards(path: str) -> None:
    with open(path, "rb", buffering=0) as fh:
        while True:
            start = time.monotonic()
            if not fh.read(CHUNK_BYTES):
                fh.seek(0)
            time.sleep(max(0.0, CHUNK_BYTES / RATE_BYTES_PER_S - (time.monotonic() - start)))


def main() -> None:
    path = make_weights_file()
    try:
        print("READY", flush=True)
        read_shards(path)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
