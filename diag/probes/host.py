"""Facts about the machine a capture ran on, so a bundle read elsewhere can be interpreted.

Clock ticks per second and the page size turn the raw /proc counters into seconds and bytes;
the kernel version explains wchan names (``futex_wait_queue_me`` vs ``futex_do_wait``); the
boot time turns process start ticks into wall-clock times.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from typing import Optional

from diag import __version__
from diag.model import HostInfo
from diag.probes.procfs import ProcFS


def parse_boot_time(stat_text: str) -> Optional[float]:
    """The ``btime`` line of /proc/stat (Unix seconds of the last boot)."""
    for line in stat_text.splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def pyspy_version(pyspy: Optional[str], timeout_s: float = 5.0) -> Optional[str]:
    """``py-spy --version`` -> "0.4.3"; None when absent or it misbehaves.

    The py-spy installed beside diag (the usual case) is told by the name of its
    ``py_spy-X.Y.Z.dist-info`` directory: no process to start in the first sample, while the
    workers want the cores (``importlib.metadata`` alone takes ~30 ms to import, and
    ``sysconfig.get_paths()`` 2-5 ms: the site-packages directories are already in
    ``sys.path``)."""
    if not pyspy:
        return None
    if os.path.dirname(pyspy) == os.path.dirname(sys.executable):
        for directory in (p for p in sys.path if p.endswith("-packages")):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                if name.startswith("py_spy-") and name.endswith(".dist-info"):
                    return name[len("py_spy-") : -len(".dist-info")]
    try:
        out = subprocess.run(
            [pyspy, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    return words[-1] if words else None


def read_host_info(procfs: ProcFS, pyspy: Optional[str] = None) -> HostInfo:
    uname = platform.uname()
    stat_text = procfs.read_global("stat")
    return HostInfo(
        hostname=socket.gethostname(),
        kernel=uname.release,
        machine=uname.machine,
        cpu_count=os.cpu_count() or 0,
        clk_tck=os.sysconf("SC_CLK_TCK"),
        page_size_bytes=os.sysconf("SC_PAGE_SIZE"),
        boot_time_s=parse_boot_time(stat_text) if stat_text else None,
        python_version=platform.python_version() or sys.version.split()[0],
        diag_version=__version__,
        pyspy_version=pyspy_version(pyspy),
    )
