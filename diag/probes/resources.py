"""Per-process resource counters: CPU ticks, RSS, I/O, thread count, state.

These are the "is it moving at all" signals: CPU ticks and rchar that keep rising under an
unchanged stack mean busy (loading weights, a long C call), flat ones mean waiting. Everything
comes from /proc/P/stat and /proc/P/io (one read each) rather than psutil, so the same parsers
run on recorded text in tests and each read goes through ``ProcFS``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from diag.model import IoCounters
from diag.probes.procfs import ProcFS
from diag.probes.threads import TaskStat, parse_task_stat


class ProcResources(NamedTuple):
    stat: TaskStat
    rss_bytes: int
    vms_bytes: int
    io: Optional[IoCounters]  # None when /proc/P/io is unreadable (another user's process)


_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")


def parse_io(text: str) -> IoCounters:
    """/proc/P/io ``key: value`` lines; missing keys read 0 (kernels without task I/O acct)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key in _IO_FIELDS and value.strip().isdigit():
            values[key] = int(value)
    return IoCounters(**values)


def read_resources(procfs: ProcFS, pid: int, page_size_bytes: int) -> ProcResources:
    """Raises OSError when the process is gone (the caller marks it exited)."""
    stat = parse_task_stat(procfs.read_text(pid, "stat"))
    io: Optional[IoCounters]
    try:
        io = parse_io(procfs.read_text(pid, "io"))
    except OSError:
        io = None
    return ProcResources(
        stat=stat,
        rss_bytes=stat.rss_pages * page_size_bytes,
        vms_bytes=stat.vsize_bytes,
        io=io,
    )
