"""progressing or slow, never deadlocked: a rank writing a checkpoint shard to disk in chunks
with fsync (storage-bound: low CPU, mostly asleep in the kernel) while printing nothing -
the bytes written keep growing."""

from __future__ import annotations

import os
import tempfile
import time


def save_checkpoint(directory: str) -> None:
    path = os.path.join(directory, "model-00001-of-00008.safetensors")
    chunk = os.urandom(8 << 20)
    with open(path, "wb") as fh:
        os.unlink(path)  # the space goes back when the process dies, however it dies
        os.rmdir(directory)
        print("READY", flush=True)
        for _ in range(4096):  # throttled: far longer than a capture
            fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
            if fh.tell() > (256 << 20):  # bounded disk use
                fh.seek(0)
            time.sleep(0.2)


if __name__ == "__main__":
    save_checkpoint(tempfile.mkdtemp(prefix="diag-ckpt-"))
