"""progressing, with the bottleneck stage named: a two-stage pipeline (gloo, point-to-point
send/recv) split unevenly - stage 0 holds five times the layers of stage 1. Stage 0 computes
nearly all the time while stage 1 waits for it in a receive; diag names rank 0 as the
straggler, with its share, and says to rebalance the split."""

from __future__ import annotations

import _gloo
import _gloo_pipeline

if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, _gloo_pipeline.WORLD_SIZE)
    else:
        _gloo_pipeline.run({0: 10, 1: 2})
