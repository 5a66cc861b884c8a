"""The one door to /proc: every read goes through a ``ProcFS`` whose root can be swapped.

Tests point the root at a directory of recorded files (``tests/data/proc/...``) so the parsers
run on real text from real kernels without a live process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Union


def _read_to_eof(fd: int, chunks: List[bytes]) -> bytes:
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _read_fd(path: str) -> bytes:
    """The hot path (four files per thread per sample): a string path and a raw fd cost about a
    third of ``pathlib`` + a buffered file object, which matters at 8 ranks x 64 threads."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _read_to_eof(fd, [])
    finally:
        os.close(fd)


_ONE_READ_BYTES = 16384


def _read_small(path: str) -> bytes:
    """A per-thread file (stat, status, wchan, syscall: one-record seq files, < 2 kB) comes
    whole from one read; the usual second read that sees EOF is skipped - with four files
    per thread and 512 threads, it was a quarter of a sample's syscalls."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        first = os.read(fd, _ONE_READ_BYTES)
        return first if len(first) < _ONE_READ_BYTES else _read_to_eof(fd, [first])
    finally:
        os.close(fd)


def read_capped(path: str, max_bytes: int) -> Optional[bytes]:
    """At most ``max_bytes`` of a file (the target controls argv, environment, its maps and
    fds); None when it cannot be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks: List[bytes] = []
        left = max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class ProcFS:
    def __init__(self, root: Union[str, Path] = "/proc") -> None:
        self.root = Path(root)

    @property
    def live(self) -> bool:
        """This machine's own /proc (not a recorded tree): kernel interfaces beside /proc,
        such as netlink, describe the same processes."""
        return self.root == Path("/proc")

    def path(self, pid: int, *parts: str) -> Path:
        return self.root.joinpath(str(pid), *parts)

    def spath(self, pid: int, *parts: str) -> str:
        """``path`` as a string, built without pathlib: the per-fd and per-thread reads build
        thousands a sample, and ``Path.joinpath`` was over a third of the socket probe."""
        return f"{self.root}/{pid}/{'/'.join(parts)}" if parts else f"{self.root}/{pid}"

    def read_text(self, pid: int, *parts: str) -> str:
        """Read a /proc file; raises OSError (ENOENT when the process is gone)."""
        return _read_fd(f"{self.root}/{pid}/{'/'.join(parts)}").decode("utf-8", "replace")

    def read_task_text(self, pid: int, tid: int, name: str) -> str:
        return _read_small(f"{self.root}/{pid}/task/{tid}/{name}").decode("utf-8", "replace")

    def read_task_texts(self, pid: int, tid: int, names: Sequence[str]) -> List[Optional[str]]:
        """Several small files of one thread, None for each that cannot be read (the thread
        exited, or no right to it): one call per thread instead of one per file, which was a
        tenth of reading a 64-thread rank."""
        prefix = f"{self.root}/{pid}/task/{tid}/"
        out: List[Optional[str]] = []
        for name in names:
            try:
                data = _read_small(prefix + name)
            except OSError:
                out.append(None)
                continue
            out.append(data.decode("utf-8", "replace"))
        return out

    def read_bytes(self, pid: int, *parts: str) -> bytes:
        return _read_fd(f"{self.root}/{pid}/{'/'.join(parts)}")

    def read_bytes_capped(self, pid: int, name: str, max_bytes: int) -> bytes:
        """At most ``max_bytes`` of ``/proc/PID/NAME``; raises OSError when unreadable."""
        data = read_capped(f"{self.root}/{pid}/{name}", max_bytes)
        if data is None:
            raise OSError(f"cannot read /proc/{pid}/{name}")
        return data

    def try_read_text(self, pid: int, *parts: str) -> Optional[str]:
        try:
            return self.read_text(pid, *parts)
        except OSError:
            return None

    def tids(self, pid: int) -> List[int]:
        try:
            return sorted(int(n) for n in os.listdir(self.spath(pid, "task")) if n.isdigit())
        except OSError:
            return []

    def pids(self) -> List[int]:
        try:
            return sorted(int(n) for n in os.listdir(self.root) if n.isdigit())
        except OSError:
            return []

    def readlink(self, pid: int, *parts: str) -> Optional[str]:
        try:
            return os.readlink(self.spath(pid, *parts))
        except OSError:
            return None

    def fds(self, pid: int) -> List[int]:
        try:
            return sorted(int(n) for n in os.listdir(self.spath(pid, "fd")) if n.isdigit())
        except OSError:
            return []

    def read_global(self, *parts: str) -> Optional[str]:
        """A host-wide file such as /proc/net/tcp or /proc/stat."""
        try:
            with open(self.root.joinpath(*parts), "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return None
