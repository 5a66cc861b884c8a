"""progressing, no straggler (the contrast of gloo_straggler): 4 gloo ranks train
data-parallel with the same work per step; diag says no rank is the one the others wait for."""

from __future__ import annotations

import _gloo
import _gloo_steps

if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo_steps.flight_recorder_env()
        _gloo.launch(__file__, _gloo_steps.WORLD_SIZE)
    else:
        _gloo_steps.run({})
