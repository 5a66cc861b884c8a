"""progressing, with a straggler: 4 gloo ranks train data-parallel; rank 2 computes 4x longer
per step than the others, which wait for it in every all_reduce. diag names rank 2 with its
figures (computing in most samples at ~a full core; ranks 0, 1, 3 waiting in `all_reduce`)."""

from __future__ import annotations

import _gloo
import _gloo_steps

if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo_steps.flight_recorder_env()
        _gloo.launch(__file__, _gloo_steps.WORLD_SIZE)
    else:
        _gloo_steps.run({2: 4})
