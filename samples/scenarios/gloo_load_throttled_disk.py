"""slow, with its cause (issue #37): 3 gloo ranks; rank 0 reads its 48 MiB shard from a disk
that its cgroup may read at 1 MiB/s (a loop device under a cgroup v1 blkio throttle, made by
the caller: ``DIAG_LOAD_PATH`` is the file on it, ``DIAG_BLKIO_CGROUP`` the throttled group,
which rank 0 joins) while ranks 1, 2 wait for it in a barrier. diag gives its rate and ETA and
names the throttle. Without ``DIAG_BLKIO_CGROUP`` - the healthy contrast - the read is not held
back, the load ends before the capture and the ranks train (progressing)."""

from __future__ import annotations

import os
from pathlib import Path

import _gloo
import _slow_sources


def load() -> None:
    group = os.environ.get("DIAG_BLKIO_CGROUP")
    if group:
        (Path(group) / "cgroup.procs").write_text(f"{os.getpid()}\n")
    _slow_sources.read_file(os.environ["DIAG_LOAD_PATH"])


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, _slow_sources.WORLD_SIZE, settle_s=3.0)
    else:
        _slow_sources.run_rank(load, "loading")
