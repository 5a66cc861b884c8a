"""Framework packs: one module per framework, each a ``PACK`` record (``base.Pack``).

The verdict's generic cause modules read the union of all packs (``union``), never a single
framework by name. To teach diag a framework: add a module here with its ``PACK``, list it in
``_MODULES``, and follow docs/frameworks.md.
"""

from __future__ import annotations

import importlib
from typing import Tuple

from diag.frameworks.base import Clock, NativeProgress, Pack, RoleSign

# One entry per pack module, in the order a report lists frameworks.
_MODULES: Tuple[str, ...] = (
    *("sglang", "vllm", "torch", "torch_distributed", "torchrun", "deepspeed", "accelerate"),
    *("ray", "servers", "dataloader", "hf", "file_locks", "fuse", "pyzmq", "launchers"),
    "stdlib",
    *("mpi", "ucx", "cuda"),
    *("grpc", "dask"),
)


def _load() -> Tuple[Pack, ...]:
    packs = []
    for name in _MODULES:
        module = importlib.import_module(f"diag.frameworks.{name}")
        packs.append(module.PACK)
    return tuple(packs)


PACKS: Tuple[Pack, ...] = _load()

__all__ = ["PACKS", "Clock", "NativeProgress", "Pack", "RoleSign"]
