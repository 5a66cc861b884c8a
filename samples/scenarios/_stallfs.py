"""A tiny FUSE daemon that never answers reads
(``_stallfs.py MOUNTPOINT WATCH_PID [RATE [DELAY]]``), spoken straight over /dev/fuse (no
libfuse): one regular file, ``shard0.bin``, whose lookup, open and getattr are answered and
whose reads are left pending forever - a FUSE backend stuck on its object store. It unmounts
(lazily) and exits once WATCH_PID is gone, so a scenario killed with SIGKILL leaves no mount
behind. Given RATE (bytes per second), it answers reads at that pace instead (zeros): a slow
mirror or a saturated network mount; given DELAY, each read takes that long (a mount that
answers a batch now and then). Needs root (mount(2)) and /dev/fuse."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time

_IN = struct.Struct("<IIQQIIII")
_MNT_DETACH = 2
SIZE = 64 << 20


def _attr(ino: int, mode: int, size: int) -> bytes:
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, 1, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0,
                       4096, 0)  # fmt: skip


def _watch(pid: int, libc: ctypes.CDLL, mountpoint: str) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            libc.umount2(mountpoint.encode(), _MNT_DETACH)
            os._exit(0)
        time.sleep(0.5)


def serve(mountpoint: str, watch_pid: int, rate: float = 0.0, delay_s: float = 0.0) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"stallfs", mountpoint.encode(), b"fuse.stallfs", 0, opts) != 0:
        sys.exit(f"mount failed: errno {ctypes.get_errno()}")
    threading.Thread(target=_watch, args=(watch_pid, libc, mountpoint), daemon=True).start()

    def reply(unique: int, payload: bytes = b"", error: int = 0) -> None:
        os.write(fd, struct.pack("<IiQ", 16 + len(payload), error, unique) + payload)

    while True:
        buf = os.read(fd, 1 << 20)
        _, op, unique, node, *_ = _IN.unpack_from(buf)
        body = buf[_IN.size :]
        if op == 26:  # INIT: protocol 7.31, no optional features
            ra = struct.unpack_from("<III", body)[2]
            reply(unique, struct.pack("<IIIIHHIIHHI", 7, 31, ra, 0, 16, 12, 1 << 17, 0, 0, 0, 0)
                  + b"\0" * 28)  # fmt: skip
        elif op == 1:  # LOOKUP
            if body.split(b"\0")[0] == b"shard0.bin":
                entry = struct.pack("<QQQQII", 2, 0, 60, 60, 0, 0)
                reply(unique, entry + _attr(2, 0o100644, SIZE))
            else:
                reply(unique, error=-2)
        elif op == 3:  # GETATTR
            a = _attr(1, 0o40755, 0) if node == 1 else _attr(2, 0o100644, SIZE)
            reply(unique, struct.pack("<QII", 60, 0, 0) + a)
        elif op in (14, 27):  # OPEN, OPENDIR
            reply(unique, struct.pack("<QII", 1, 0, 0))
        elif op == 15 and (rate > 0 or delay_s > 0):  # READ at RATE bytes/s, or DELAY s each
            offset, want = struct.unpack_from("<QI", body, 8)
            n = max(0, min(want, SIZE - offset))
            time.sleep(delay_s if delay_s > 0 else n / rate)
            reply(unique, b"\0" * n)
        elif op == 15:  # READ: the object store never answers
            continue
        elif op in (18, 25, 29):  # RELEASE, FLUSH, RELEASEDIR
            reply(unique)
        elif op == 38:  # FORGET answers nothing
            continue
        else:
            reply(unique, error=-38)  # ENOSYS


def start_detached(mountpoint: str, rate: float = 0.0, delay_s: float = 0.0) -> None:
    """Start the daemon outside the caller's process tree (double fork), as a system's FUSE
    daemon would be, and wait until the mount answers (reads at ``rate`` bytes/s, or each in
    ``delay_s``; neither: never)."""
    watch = os.getpid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            argv = [sys.executable, __file__, mountpoint, str(watch), str(rate), str(delay_s)]
            os.execv(sys.executable, argv)
        os._exit(0)
    os.wait()
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(mountpoint, "shard0.bin")):
        if time.monotonic() > deadline:
            sys.exit("stallfs: the mount never came up")
        time.sleep(0.1)


if __name__ == "__main__":
    extra = [float(x) for x in sys.argv[3:5]]
    serve(sys.argv[1], int(sys.argv[2]), *extra)
