"""FUSE daemons that serve a job's data or checkpoints (s3fs, gcsfuse, goofys,
mountpoint-s3, blobfuse2, sshfs, rclone): a rank asleep reading such a mount waits on the
daemon holding ``/dev/fuse`` for it (the collector finds it: ``diag.probes.mounts``; the
verdict reads ``FsWait`` records, ``diag.verdict.fs_waits``).

The daemons' process names, for the report and the next cause that needs them, and the kind of
mount they serve: a wait there is on the daemon. The wait itself is read from the kernel,
whatever the daemon.
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="FUSE daemons (s3fs, gcsfuse, mountpoint-s3, ...)",
    key="fuse",
    argv=("s3fs", "gcsfuse", "goofys", "mount-s3", "blobfuse2", "sshfs", "rclone"),
    serves_fs=("fuse",),
    sources=("s3fs-fuse 1.93, gcsfuse 2, mountpoint-s3 1.x process names",),
)
