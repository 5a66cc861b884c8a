"""3 gloo ranks; rank 0 saves a checkpoint with ``torch.save`` to a filesystem of its own
(``_ckpt_saver.own_filesystem``) while ranks 1, 2 wait in a barrier, then all train. A failed
save is logged and retried every 3 s - torch.save on a full disk says "unexpected pos ..." or
"file write failed", not ENOSPC."""

from __future__ import annotations

import logging
import os
import time

import _ckpt_saver
import _gloo
import _slow_sources


def save_checkpoint(size_mib: int) -> None:
    import torch

    directory = _ckpt_saver.own_filesystem(size_mib)
    log = logging.getLogger("train")
    state = {"w": torch.randn(1024, 1024)}  # 4 MiB of weights, in memory only until saved
    while True:
        try:
            torch.save(state, os.path.join(directory, "ckpt_step1000.pt"))
            return
        except Exception as e:  # torch wraps the OSError in its own RuntimeError
            log.warning("checkpoint save failed: %s; retrying in 3s", e)
            time.sleep(3.0)


def main(script: str, size_mib: int, settle_s: float = 4.0) -> None:
    """``settle_s``: how long after every rank reached its state READY comes (a failing save
    retried for long enough that its log holds the retry again and again)."""
    if _gloo.rank() is None:
        _gloo.launch(script, _slow_sources.WORLD_SIZE, settle_s=settle_s)
    else:
        _slow_sources.run_rank(lambda: save_checkpoint(size_mib), "saving")
