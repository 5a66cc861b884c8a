"""slow, not "progressing: rank 0 keeps writing output" (issue #37): 3 gloo ranks; rank 0
compresses a checkpoint in native code (zlib, level 9, chunk by chunk to a file) while ranks
1, 2 wait for it in a barrier. It burns a core and its file grows, but the job's steps have
stopped for this phase: diag names it (compressing) with its rate. ``DIAG_SOURCE_RATE`` set
high - the healthy contrast - compresses a few chunks only: the phase ends before the capture
and the ranks train (progressing)."""

from __future__ import annotations

import os
import tempfile
import zlib

import _gloo
import _slow_sources

CHUNK_BYTES = 4 << 20


def compress_checkpoint() -> None:
    """zlib level 9 over 4 MiB chunks of half-random data, written out: ~0.3 s a chunk here."""
    chunks = 4 if _slow_sources.rate() > _slow_sources.SLOW_RATE else 400
    block = os.urandom(CHUNK_BYTES // 2) * 2
    fd, path = tempfile.mkstemp(prefix="diag-ckpt-", suffix=".pt.zst")
    os.unlink(path)  # the space goes back when the process dies, however it dies
    with os.fdopen(fd, "wb") as out:
        for _ in range(chunks):
            out.write(zlib.compress(block, 9))
            if out.tell() > (256 << 20):
                out.seek(0)  # bounded disk use


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, _slow_sources.WORLD_SIZE, settle_s=3.0)
    else:
        _slow_sources.run_rank(compress_checkpoint, "compressing")
