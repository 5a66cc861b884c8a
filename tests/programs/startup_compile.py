"""A real ``torch.compile`` on CPU, again and again: each round compiles a new function with
inductor (its C++ goes through g++), caches off, so the job stays in its compile phase. READY
once the first compile is under way (a thread prints it)."""

from __future__ import annotations

import os
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch


def make(k: int):  # type: ignore[no-untyped-def]
    def step(x: torch.Tensor) -> torch.Tensor:
        for i in range(6):
            x = torch.sin(x * (k + i)) + torch.cos(x) * x.sum(dim=-1, keepdim=True)
        return torch.relu(x @ x.T) + k

    return step


def main() -> None:
    threading.Timer(1.0, lambda: print("READY", flush=True)).start()
    k = 0
    while True:
        k += 1
        fn = torch.compile(make(k), dynamic=False)
        fn(torch.randn(16 + k, 16 + k))
        torch._dynamo.reset()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
