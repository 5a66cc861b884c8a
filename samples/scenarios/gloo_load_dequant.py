"""slow: rank 0 is CPU-bound dequantizing weights in pure Python (memory growing, log silent)
while ranks 1-3 already wait in a barrier - the model-load case that looks hung but is not."""

from __future__ import annotations

from typing import List

import _gloo

WORLD_SIZE = 4


def dequantize_int4(packed: bytes, scale: float) -> List[float]:
    out: List[float] = []
    for byte in packed:
        out.append(((byte & 0x0F) - 8) * scale)
        out.append(((byte >> 4) - 8) * scale)
    return out


def load_weights() -> None:
    shards = []
    _gloo.mark("dequantizing")
    for shard in range(100_000):  # "547 GB": far longer than any capture
        packed = bytes(range(shard % 7, 256)) * 400  # reading the shard is fast...
        shards.append(dequantize_int4(packed, 0.01))  # ...unpacking it in Python is not
        del shards[:-30]  # bounded: ~200 MB resident at most


def main() -> None:
    import torch.distributed as dist

    _gloo.init()
    if _gloo.rank() == 0:
        load_weights()
    else:
        _gloo.mark("barrier")
    dist.barrier()


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE)
    else:
        main()
