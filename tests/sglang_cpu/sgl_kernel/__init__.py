"""A stand-in for SGLang's kernel package (``sgl-kernel``) on a CPU without its C++ build.

PyPI has no CPU build of ``sgl-kernel`` / ``sglang-kernel`` (CUDA wheels only, no sdist). With
``SGLANG_USE_CPU_ENGINE=1``, SGLang 0.5.23 imports exactly two of its CPU ops unconditionally:

- ``assign_req_to_token_pool_cpu`` (``sglang/srt/mem_cache/allocation.py``), on every step:
  writes each request's new KV slot indices into its row of ``req_to_token``;
- ``copy_all_layer_kv_cache_cpu`` (``sglang/kernels/ops/kvcache/cache_move.py``): moves KV rows
  from one slot to another in every layer's buffer.

Both are written here in plain torch, with the semantics of SGLang's own Triton kernels beside
them (``assign_req_to_token_pool``, ``copy_all_layer_kv_cache_tiled``). Every other import of
``sgl_kernel`` in SGLang sits behind a CUDA/ROCm check or a ``try``: a missing name raises
``ImportError`` there as it would without the package. Enough for a Llama on the CPU engine
(speculative decoding and the AMX-only models stay unavailable). Everything else that runs is
SGLang's own code.
"""

from __future__ import annotations

import ctypes
from typing import Callable, NoReturn

import torch

__version__ = "0.0.0+diag.cpu.standin"

# Imported by name (at import time, under the same CPU check) by SGLang's speculative-decoding
# modules, which its scheduler imports whether or not speculative decoding is on; called only
# with ``--speculative-algorithm``. Here they exist and refuse to run.
SPECULATIVE_OPS = (
    "build_tree_kernel_efficient_cpu",  # sglang/kernels/ops/speculative/spec_tree.py
    "verify_tree_greedy_cpu",  # spec_tree.py
    "fill_accept_out_cache_loc_cpu",  # speculative/eagle.py
    "fill_bonus_tokens_cpu",  # eagle.py
    "rotate_input_ids_cpu",  # speculative/multi_layer_eagle.py
    "assign_draft_cache_locs_contiguous_cpu",  # speculative/cache_locs.py
    "assign_extend_cache_locs_cpu",  # cache_locs.py
)
__all__ = [
    "assign_req_to_token_pool_cpu",
    "copy_all_layer_kv_cache_cpu",
    *SPECULATIVE_OPS,
]


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """``req_to_token[req_pool_indices[i], start[i]:end[i]]`` = request i's slice of
    ``out_cache_loc`` (the requests' new slots, laid end to end in batch order)."""
    del pool_len  # the row length; indexing req_to_token knows it
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    at = 0
    for row, start, end in zip(rows, starts, ends):
        n = end - start
        if n <= 0:
            continue
        req_to_token[row, start:end] = out_cache_loc[at : at + n].to(req_to_token.dtype)
        at += n


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor,
    strides: torch.Tensor,
    tgt_loc: torch.Tensor,
    src_loc: torch.Tensor,
) -> None:
    """For every buffer (``data_ptrs[b]``, rows of ``strides[b]`` bytes): row ``tgt_loc[i]`` =
    row ``src_loc[i]``, all sources read before any target is written (safe in place)."""
    src = src_loc.to(torch.int64)
    tgt = tgt_loc.to(torch.int64)
    if src.numel() == 0:
        return
    rows = int(max(int(src.max()), int(tgt.max()))) + 1
    for ptr, stride in zip(data_ptrs.tolist(), strides.tolist()):
        raw = (ctypes.c_uint8 * (rows * int(stride))).from_address(int(ptr))
        buf = torch.frombuffer(raw, dtype=torch.uint8).view(rows, int(stride))
        buf[tgt] = buf[src].clone()


def _unavailable(name: str) -> Callable[..., NoReturn]:
    def op(*args: object, **kwargs: object) -> NoReturn:
        raise NotImplementedError(
            f"sgl_kernel.{name}: speculative decoding needs SGLang's real CPU kernels, which this "
            "stand-in (tests/sglang_cpu) does not have"
        )

    op.__name__ = name
    return op


for _name in SPECULATIVE_OPS:
    globals()[_name] = _unavailable(_name)
