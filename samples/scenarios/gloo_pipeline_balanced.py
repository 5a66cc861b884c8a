"""progressing, no straggler (the contrast of gloo_pipeline_unbalanced): a two-stage pipeline
(gloo, point-to-point send/recv) split evenly; each stage waits for the other in turn."""

from __future__ import annotations

import _gloo
import _gloo_pipeline

if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, _gloo_pipeline.WORLD_SIZE)
    else:
        _gloo_pipeline.run({0: 6, 1: 6})
