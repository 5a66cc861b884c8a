"""slow, not "progressing: rank 0 keeps writing output" (issue #37): 3 gloo ranks; rank 0
downloads its 64 MiB of weights from a mirror that sends about 1 MiB/s (a local rate-limited
HTTP server outside the job) while ranks 1, 2 wait for it in a barrier. Rank 0's file grows and
its socket receives; the job's steps have not started. diag names the phase (downloading) and
its rate. ``DIAG_SOURCE_RATE`` set high is the healthy contrast: the download is over before
the capture and the ranks train (progressing)."""

from __future__ import annotations

import os
import tempfile

import _gloo
import _slow_sources

if __name__ == "__main__":
    if _gloo.rank() is None:
        os.environ["DIAG_MIRROR_URL"] = _slow_sources.start_mirror()
        _gloo.launch(__file__, _slow_sources.WORLD_SIZE, settle_s=3.0)
    else:
        url, dest = os.environ["DIAG_MIRROR_URL"], tempfile.mkdtemp(prefix="diag-dl-")
        _slow_sources.run_rank(lambda: _slow_sources.download(url, dest), "downloading")
