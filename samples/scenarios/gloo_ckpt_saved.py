"""progressing (the contrast of ``gloo_ckpt_retry_full_disk``): the same ranks and save on a
64 MiB filesystem - the save succeeds at once and the ranks train, logging their steps."""

from __future__ import annotations

import _gloo_ckpt

if __name__ == "__main__":
    _gloo_ckpt.main(__file__, size_mib=64)
