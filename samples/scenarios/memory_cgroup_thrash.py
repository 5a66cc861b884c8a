"""slow, under memory pressure (issue #37): a job maps a 96 MiB data file and reads every page
of it, pass after pass, logging a line per pass - inside a memory cgroup whose limit (made by
the caller, named by ``DIAG_MEM_CGROUP``) is half that. Its pages are evicted and read back on
every pass: the group sits at its limit, ``failcnt`` grows, the process takes thousands of
major faults a second and its threads stall in the kernel. Without ``DIAG_MEM_CGROUP`` - the
healthy contrast - the file stays cached after the first pass and the job progresses."""

from __future__ import annotations

import mmap
import os
import sys
import tempfile
import time
from pathlib import Path

SIZE_BYTES = 96 << 20
PAGE = 4096


def confine() -> None:
    group = os.environ.get("DIAG_MEM_CGROUP")
    if group:
        (Path(group) / "cgroup.procs").write_text(f"{os.getpid()}\n")


def main() -> None:
    confine()
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-mem-")
    fd, path = tempfile.mkstemp(prefix="diag-thrash-", dir="/var/tmp")
    try:
        block = os.urandom(1 << 20)
        for _ in range(SIZE_BYTES >> 20):
            os.write(fd, block)
        data = mmap.mmap(fd, SIZE_BYTES, prot=mmap.PROT_READ)
        # No readahead: every page read back is a fault of its own, as for a model's weights
        # gathered by an index. With it, one fault brought in 128 KiB+ and a loaded host saw
        # ~19 major faults/s - a thrash too cheap to tell from a healthy job at its limit.
        data.madvise(mmap.MADV_RANDOM)
    finally:
        os.close(fd)
        os.unlink(path)  # the mapping keeps it; the space goes back when the job ends
    with open(os.path.join(where, "passes.log"), "a", buffering=1) as log:
        print("READY", flush=True)
        deadline = time.monotonic() + 600
        passes = 0
        while time.monotonic() < deadline:
            total = 0
            for offset in range(0, SIZE_BYTES, PAGE):
                total += data[offset]
            passes += 1
            log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pass {passes} sum {total}\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
