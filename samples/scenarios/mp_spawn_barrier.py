"""deadlocked: ``torch.multiprocessing.spawn`` (no torchrun, no RANK in the environment: the
rank is a function argument). Rank 2 waits for a checkpoint upload that never finishes (a
sleep-and-poll loop); ranks 0 and 1 wait for it in ``barrier``."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path


def upload_checkpoint(done_flag: str) -> None:
    while not os.path.exists(done_flag):  # the uploader died; the flag never appears
        time.sleep(1.0)


def worker(rank: int, world_size: int, port: int, markers: str) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=600),
    )
    (Path(markers) / f"rank{rank}").write_text("")
    if rank == 2:
        upload_checkpoint("/nonexistent/upload.done")
    dist.barrier()


def _ready_when_marked(markers: str, world_size: int) -> None:
    while len(list(Path(markers).iterdir())) < world_size:
        time.sleep(0.1)
    time.sleep(1.5)
    print("READY", flush=True)


def main() -> None:
    import threading

    import torch.multiprocessing as mp

    world_size = 3
    markers = tempfile.mkdtemp(prefix="diag-spawn-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    threading.Thread(target=_ready_when_marked, args=(markers, world_size), daemon=True).start()
    mp.spawn(worker, args=(world_size, port, markers), nprocs=world_size)


if __name__ == "__main__":
    main()
