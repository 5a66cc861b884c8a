"""deadlocked, rank 0 named, not "slow: rank 0 is alone in a phase - writing, writes 512
KiB/s ... don't kill": rank 0 retries ``torch.save`` of a 4 MiB checkpoint to a 1 MiB
filesystem every 3 s, its log saying only "checkpoint save failed: ... unexpected pos ...;
retrying in 3s", while ranks 1, 2 wait in a barrier. What it writes each try is what the next
try writes again: no output, no phase that ends. Contrast: ``gloo_ckpt_saved`` (64 MiB: the
save succeeds and the ranks train)."""

from __future__ import annotations

import _gloo_ckpt

if __name__ == "__main__":
    _gloo_ckpt.main(__file__, size_mib=1, settle_s=14.0)  # 5 failed tries logged
