"""deadlocked (``spins_with_no_party``: the PAUSE loop's code says it waits): a process waits
for its peer's "weights ready" word in a shared-memory mailbox with a native busy-poll - a C loop
(``while (*flag != expect) pause;``) called through ctypes, the GIL released, no syscall -
the way a communication library's progress engine spins for a message. The peer (a child
process) crashed before posting ("peer: CUDA error: out of memory" in the log) and was
reaped: no zombie is left, the spin never ends, at 100% of a core on one frame.

``alive`` (argv; native_spin_live_peer.py): the contrast - the peer lives and computes for
minutes before it posts; the same spin ends then: slow, wait.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
from multiprocessing import shared_memory
from typing import Any

import numpy as np

SPIN_C = r"""
#include <stdint.h>
/* wait for a peer's message in a shared-memory mailbox: busy-poll, no syscall */
int64_t wait_flag(volatile int64_t *flag, int64_t expect) {
    uint64_t spins = 0;
    while (*flag != expect) { spins++; __asm__ volatile("pause"); }
    return (int64_t)spins;
}
"""


def peer(box: np.ndarray[Any, Any], alive: bool) -> None:
    if not alive:
        raise SystemExit("peer: CUDA error: out of memory")  # never posts
    total = 0
    for i in range(3_000_000_000):  # minutes of work before it posts
        total += i
    box[0] = 1


def main(alive: bool) -> None:
    work = tempfile.mkdtemp(prefix="diag-spin-")
    log = open(os.path.join(work, "job.log"), "a", buffering=1)  # noqa: SIM115
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    src, lib_path = os.path.join(work, "spin.c"), os.path.join(work, "libspin.so")
    with open(src, "w") as f:
        f.write(SPIN_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib_path, src], check=True)
    lib = ctypes.CDLL(lib_path)
    lib.wait_flag.restype = ctypes.c_int64
    lib.wait_flag.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    shm = shared_memory.SharedMemory(create=True, size=8)
    shm.unlink()  # the mapping lives on in both (the peer is forked): nothing left in /dev/shm
    box = np.ndarray((1,), dtype=np.int64, buffer=shm.buf)
    box[0] = 0
    fork = multiprocessing.get_context("fork")
    proc = fork.Process(target=peer, args=(box, alive), name="peer")
    proc.start()
    if not alive:
        proc.join()  # reaped: no zombie left to see
    threading.Timer(1.0, lambda: print("READY", file=ready_out, flush=True)).start()
    lib.wait_flag(ctypes.c_void_p(box.ctypes.data), 1)
    print("got the weights")


if __name__ == "__main__":
    main(alive="alive" in sys.argv[1:])
