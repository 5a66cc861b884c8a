"""slow: a start-up that only compiles - ``torch.compile`` (inductor, CPU) of one new function
after another, each traced, lowered to C++ and built with the system compiler, nothing logged.
The process writes (generated source, the compile cache) and short-lived compilers come and
go: that is the compiling phase's work, not the job's output - slow, "compiling", not
"progressing: keeps writing output"."""

from __future__ import annotations

import os
import tempfile
from typing import Callable

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="diag-inductor-"))


def make_layer(k: int) -> Callable[..., object]:
    def layer(x: object) -> object:
        return (x * (k + 1)).sin() + (x * (k + 2)).cos()  # type: ignore[operator]

    return layer


def warm_up_kernels() -> None:
    import torch

    torch.set_num_threads(1)
    k = 0
    while True:  # every function a new graph: compiled from scratch
        compiled = torch.compile(make_layer(k), dynamic=False)
        compiled(torch.randn(16 + k))
        if k == 0:
            print("READY", flush=True)  # the compiler stack is loaded; compiling goes on
        k += 1


if __name__ == "__main__":
    warm_up_kernels()
