"""``diag demo load`` (expected: slow): a model load that looks hung but is not.

Four ranks. Rank 0 "dequantizes" int4 weights in pure Python - a CPU-bound loop in
``dequantize_int4`` over a weights file it wrote first, far longer than any capture - while
ranks 1-3 already wait for it in ``barrier``. Nothing is logged. A hang detector that only
watches the log or the GPU calls this a deadlock; diag sees rank 0 burning a core in user
code and calls it slow, naming rank 0 and the barrier the others wait in.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any, List

from diag.demo import _ranks

WORLD_SIZE = 4
WEIGHTS_BYTES = 1 << 20  # 1 MiB of packed int4, read again and again: "547 GB"


def write_weights() -> None:
    """The checkpoint shard rank 0 will load (random bytes, written once)."""
    (_ranks.work_dir() / "weights.int4").write_bytes(os.urandom(WEIGHTS_BYTES))


def dequantize_int4(packed: bytes, scale: float, out: List[float]) -> None:
    """Unpack two 4-bit weights per byte into ``out``, one Python operation at a time (the
    slow part). ``out`` is reused: the old values are freed here, not in the caller - a
    sample then always finds the CPU in this frame, not in a list's deallocation."""
    at = 0
    for byte in packed:
        out[at] = ((byte & 0x0F) - 8) * scale
        out[at + 1] = ((byte >> 4) - 8) * scale
        at += 2


def load_weights() -> None:
    path = _ranks.work_dir() / "weights.int4"
    chunk_bytes = 64 * 1024
    layer: List[float] = [0.0] * (2 * chunk_bytes)  # one layer's weights, reused
    _ranks.mark("dequantizing")
    for _layer in range(1_000_000):  # far longer than any capture
        with path.open("rb") as f:
            while True:
                packed = f.read(chunk_bytes)  # reading the shard is fast...
                if len(packed) < chunk_bytes:
                    break
                dequantize_int4(packed, 0.01, layer)  # ...unpacking it is not


def rank_main(group: Any) -> None:
    if _ranks.rank() == 0:
        load_weights()
    else:
        _ranks.mark("barrier")
    _ranks.barrier(group)


def main() -> None:
    write_weights()
    group = multiprocessing.get_context("spawn").Barrier(WORLD_SIZE)
    _ranks.launch(rank_main, WORLD_SIZE, (group,))


if __name__ == "__main__":
    main()
