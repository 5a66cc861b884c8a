"""A loader on slow storage: reads a weights file with the real safetensors / torch packages,
pacing itself (``--rate-mib`` per second) the way a throttled network filesystem would.

    startup_load.py --mode mmap|read|torchload --file F --side S [--hang-at 0.3] [...]

``mmap``: ``safe_open`` (the mapping's pages become resident as each tensor is used);
``read``: ``f.read`` in chunks, then ``safetensors.torch.load`` of the bytes; ``torchload``:
``torch.load`` through a file object that reads slowly. ``--hang-at F``: after that fraction it
blocks for good on a barrier nobody else reaches. After each step it writes its true progress
to ``--side`` (JSON: done, total bytes, rate bytes/s) for the test to compare; it prints READY
after the first step. Extra arguments (``--watchdog-timeout 5``) are accepted and ignored, so a
test can dress it up as a framework's server.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import Any, BinaryIO


class Pacer:
    def __init__(self, side: str, total: int, rate: float, hang_at: float) -> None:
        self.side, self.total, self.rate, self.hang_at = side, total, rate, hang_at
        self.done = 0
        self.ready = False

    def step(self, nbytes: int) -> None:
        self.done += nbytes
        time.sleep(nbytes / self.rate)
        tmp = self.side + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"done": self.done, "total": self.total, "rate": self.rate,
                       "t": time.time()}, fh)  # fmt: skip
        os.replace(tmp, self.side)
        if not self.ready:
            self.ready = True
            print("READY", flush=True)
        if self.hang_at and self.done >= self.hang_at * self.total:
            threading.Barrier(2).wait()  # the peer never comes


class SlowFile:
    """A file object for torch.load whose reads pace themselves."""

    def __init__(self, fh: BinaryIO, pacer: Pacer) -> None:
        self.fh, self.pacer = fh, pacer

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        if len(data) >= 1 << 20:
            self.pacer.step(len(data))
        return data

    def readinto(self, buf: Any) -> int:
        n = self.fh.readinto(buf)
        if n and n >= 1 << 20:
            self.pacer.step(n)
        return n or 0

    def seek(self, *args: int) -> int:
        return self.fh.seek(*args)

    def tell(self) -> int:
        return self.fh.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--side", required=True)
    ap.add_argument("--rate-mib", type=float, default=40.0)
    ap.add_argument("--chunk-mib", type=int, default=16)
    ap.add_argument("--hang-at", type=float, default=0.0)
    args, _ = ap.parse_known_args()
    total = os.path.getsize(args.file)
    pacer = Pacer(args.side, total, args.rate_mib * (1 << 20), args.hang_at)
    if args.mode == "mmap":
        from safetensors import safe_open

        with safe_open(args.file, framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                tensor = f.get_tensor(name)
                float(tensor.sum())  # use it: its pages of the mapping become resident
                pacer.step(tensor.numel() * tensor.element_size())
    elif args.mode == "read":
        import safetensors.torch

        data = bytearray()
        with open(args.file, "rb", buffering=0) as fh:
            while True:
                chunk = fh.read(args.chunk_mib << 20)
                if not chunk:
                    break
                data += chunk
                pacer.step(len(chunk))
        safetensors.torch.load(bytes(data))
    elif args.mode == "torchload":
        import torch

        with open(args.file, "rb") as fh:
            torch.load(SlowFile(fh, pacer), weights_only=True)
    time.sleep(600)  # loaded: stay until killed


if __name__ == "__main__":
    main()
