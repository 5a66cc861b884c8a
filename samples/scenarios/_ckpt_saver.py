"""A training loop's checkpoint saver on a small filesystem of its own: every 3 s it writes a
4 MiB checkpoint (the previous one removed first) and logs the outcome, retrying a failed save
for ever - as a trainer that must not lose its state does.

The filesystem is a tmpfs of ``size_mib`` mounted in a mount namespace of the process's own
(``unshare(CLONE_NEWNS)``: it goes away with the process), where the process may mount (root,
CAP_SYS_ADMIN); elsewhere the process's file-size limit (RLIMIT_FSIZE) stands in for the size,
and the kernel refuses with EFBIG ("File too large") instead of ENOSPC."""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import subprocess
import tempfile
import time

LIFETIME_S = 600  # SIGALRM's default action ends the process then, whatever happens
CKPT_BYTES = 4 << 20
CLONE_NEWNS = 0x00020000


def own_filesystem(size_mib: int) -> str:
    """A directory on a filesystem of ``size_mib`` of its own (see the module's docstring)."""
    directory = tempfile.mkdtemp(prefix="diag-ckpt-")
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0 and libc.unshare(CLONE_NEWNS) == 0:
        subprocess.run(["mount", "--make-rprivate", "/"], check=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}M", "tmpfs", directory], check=True
        )
    else:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size_mib << 20, size_mib << 20))
    return directory


def run(size_mib: int) -> None:
    signal.alarm(LIFETIME_S)
    directory = own_filesystem(size_mib)
    logging.basicConfig(
        filename=os.path.join(tempfile.mkdtemp(prefix="diag-train-"), "train.log"),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    state = os.urandom(CKPT_BYTES)  # the model's weights: in memory only until saved
    step, ready = 1000, False
    while True:
        path = os.path.join(directory, "ckpt.pt")
        try:
            if os.path.exists(path):
                os.unlink(path)
            with open(path, "wb") as f:
                f.write(state)
            logging.info("saved checkpoint step %d (4.0 MiB)", step)
            step += 100
        except OSError as e:
            logging.warning("checkpoint save failed: %s; retrying in 3s", e)
        if not ready:
            print("READY", flush=True)
            ready = True
        time.sleep(3.0)
