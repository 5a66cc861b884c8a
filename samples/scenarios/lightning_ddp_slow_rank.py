"""slow: lightning_ddp_dead_fetch's contrast - the same Lightning DDP job (gloo, 2 ranks), but
at step 20 rank 1 computes for minutes in its ``training_step`` (CPU) while rank 0 waits for
its gradients in backward. No thread died: wait for it."""

from __future__ import annotations

import sys

if "slow" not in sys.argv[1:]:
    sys.argv.append("slow")  # Lightning relaunches rank 1 with this argv: it computes too

from lightning_ddp_dead_fetch import main

if __name__ == "__main__":
    main()
