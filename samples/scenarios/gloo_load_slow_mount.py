"""slow, not progressing (issue #37): 3 gloo ranks; rank 0 reads its 64 MiB shard from a FUSE
mount that answers at about 1 MiB/s (a saturated network mount) while ranks 1, 2 wait for it in
a barrier. Rank 0 writes nothing and burns little CPU; its read position moves. diag names the
phase (loading), its rate and, from the file's position against its size, its ETA.
``DIAG_SOURCE_RATE`` set high is the healthy contrast: the load is over before the capture and
the ranks train (progressing). Needs root and /dev/fuse."""

from __future__ import annotations

import os
import tempfile

import _gloo
import _slow_sources
import _stallfs

if __name__ == "__main__":
    if _gloo.rank() is None:
        mount = tempfile.mkdtemp(prefix="diag-fuse-")
        _stallfs.start_detached(mount, _slow_sources.rate())
        os.environ["DIAG_FUSE_MOUNT"] = mount
        _gloo.launch(__file__, _slow_sources.WORLD_SIZE, settle_s=3.0)
    else:
        path = os.path.join(os.environ["DIAG_FUSE_MOUNT"], "shard0.bin")
        _slow_sources.run_rank(lambda: _slow_sources.read_file(path), "loading")
