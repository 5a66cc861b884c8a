"""deadlocked, on a filesystem: 3 gloo ranks; rank 1 loads its shard from a FUSE mount whose
daemon (outside the job, like gcsfuse or mountpoint-s3) never answers the read, so rank 1
sleeps in the kernel's FUSE wait while ranks 0 and 2 wait for it in all_reduce. The daemon
holding /dev/fuse for that mount is the suspect - not rank 1, which only waits on it.
Needs root and /dev/fuse."""

from __future__ import annotations

import os
import tempfile

import _gloo
import _stallfs

WORLD_SIZE = 3


def load_shard(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(1 << 20)


def main() -> None:
    import torch
    import torch.distributed as dist

    _gloo.init()
    t = torch.ones(8)
    dist.all_reduce(t)
    if _gloo.rank() == 1:
        _gloo.mark("reading")
        load_shard(os.path.join(os.environ["DIAG_FUSE_MOUNT"], "shard0.bin"))
    else:
        _gloo.mark("all_reduce")
    dist.all_reduce(t)


if __name__ == "__main__":
    if _gloo.rank() is None:
        mount = tempfile.mkdtemp(prefix="diag-fuse-")
        _stallfs.start_detached(mount)
        os.environ["DIAG_FUSE_MOUNT"] = mount
        _gloo.launch(__file__, WORLD_SIZE)
    else:
        main()
