"""unknown or progressing, never deadlocked, from a short capture (issue #37): 3 gloo ranks
take a step every ~12 s - rank 2 reads each step's batch from a mount that answers a read in
12 s (a FUSE daemon outside the job) while ranks 0, 1 wait for it in all_reduce - and rank 0
logs a timestamped line per step. A capture of a few seconds between two lines sees ranks waiting on
a rank that does nothing; the log's own history says a line comes every 12 s.
``DIAG_HANG_AFTER=N`` makes rank 2 never come back after step N: the contrast, a real hang
with the same history, which a capture that outlasts the beat calls deadlocked."""

from __future__ import annotations

import logging
import os
import tempfile

import _gloo
import _stallfs

WORLD_SIZE = 3
STEP_S = 12.0
MARK_AT_STEP = 4  # four lines before the capture: three gaps of history


def fetch_batch(step: int) -> bytes:
    """One page of the batch at a fresh offset from the slow mount (each read answered in
    ``STEP_S``). After ``DIAG_HANG_AFTER`` steps it asks for 48 MiB in one call, which the
    mount answers 128 KiB per 12 s: a read that does not return for hours, the contrast's
    hang."""
    hang_after = int(os.environ.get("DIAG_HANG_AFTER", "0"))
    fd = os.open(os.path.join(os.environ["DIAG_FUSE_MOUNT"], "shard0.bin"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one request: no readahead
        if hang_after and step > hang_after:
            return os.pread(fd, 48 << 20, 8 << 20)  # hundreds of 12 s requests: one call
        return os.pread(fd, 4096, step * (1 << 20))
    finally:
        os.close(fd)


def main() -> None:
    import torch
    import torch.distributed as dist

    _gloo.init()
    rank = _gloo.rank() or 0
    log = logging.getLogger("train")
    if rank == 0:
        where = os.environ.get("DIAG_SCENARIO_DIR", tempfile.gettempdir())
        handler = logging.FileHandler(os.path.join(where, "train.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    grad = torch.ones(1024)
    for step in range(1, 10**6):
        if rank == 2:
            fetch_batch(step)
        dist.all_reduce(grad)
        log.info("step %d done", step)
        if step == MARK_AT_STEP:
            _gloo.mark("stepping")


if __name__ == "__main__":
    if _gloo.rank() is None:
        mount = tempfile.mkdtemp(prefix="diag-fuse-")
        _stallfs.start_detached(mount, 0.0, STEP_S)
        os.environ["DIAG_FUSE_MOUNT"] = mount
        _gloo.launch(__file__, WORLD_SIZE, settle_s=1.0)
    else:
        main()
