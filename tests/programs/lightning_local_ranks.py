"""A real Lightning Fabric job (strategy ddp, 3 CPU processes, gloo) launched by Lightning's
own subprocess launcher: local ranks 1 and 2 are re-runs of this script with only LOCAL_RANK,
NODE_RANK and WORLD_SIZE in their environment; the launching process is local rank 0 itself.
Rank 2 diverges (sleeps outside the barrier); ranks 0 and 1 wait in the barrier. Prints READY
once every rank is past init. With NODE_RANK=1 in the environment it is node 1 of a 2-node job
whose node 0 never comes: every rank waits to join the rendezvous."""

from __future__ import annotations

import os
import sys
import threading
import time

from lightning.fabric import Fabric

NODES = int(os.environ.get("TEST_NODES", "1"))


def main() -> None:
    fabric = Fabric(accelerator="cpu", devices=3, num_nodes=NODES, strategy="ddp")
    if NODES > 1 and os.environ.get("LOCAL_RANK") is None:
        # The launch blocks in the rendezvous node 0 never joins: READY once children run.
        threading.Timer(5.0, print, ("READY",), {"flush": True}).start()
    fabric.launch()
    fabric.barrier()
    if fabric.global_rank == 0:
        print("READY", flush=True)
    if fabric.global_rank == 2:
        while True:
            time.sleep(3600)
    fabric.barrier()
    sys.exit(0)


if __name__ == "__main__":
    main()
