"""One srun task of the wire test: sends a large pseudo-random blob as ``chunk`` lines.

Every task writes at once, so srun interleaves their lines; the test checks each blob arrives
whole. The blob depends only on SLURM_PROCID, so the test can rebuild it.
"""

from __future__ import annotations

import json
import os
import random
import sys

from diag.slurm.wire import TAG, encode_chunks


def blob(task: int) -> bytes:
    rng = random.Random(task)
    return json.dumps([rng.random() for _ in range(60000)]).encode()


if __name__ == "__main__":
    task = int(os.environ["SLURM_PROCID"])
    for line in encode_chunks(f"t{task}", blob(task)):
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"{TAG} done t{task}\n")
