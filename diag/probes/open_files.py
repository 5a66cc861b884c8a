"""The big files a process reads, writes or has mapped: what a loading job loads, and how far.

Two views, both cheap enough to read every sample of every rank:

- open fds (``/proc/P/fd``: the listing and one readlink per fd): a regular file of at least
  ``MIN_BYTES`` is stat'ed through its ``/proc/P/fd/N`` link (deleted files too) and its
  ``/proc/P/fdinfo/N`` gives ``pos:`` - the progress of a ``read()`` loader or a download;
- file-backed mappings (``/proc/P/maps``): a mapped file of at least ``MIN_BYTES`` that is no
  shared library - a safetensors / ``torch.load(mmap=True)`` checkpoint; only then is
  ``/proc/P/smaps`` read (it walks page tables: ~10 ms for a torch process, so never for a
  process that maps nothing big) for the Rss of each such mapping, its progress.

Every read is bounded (``*_LIMIT_BYTES``), at most ``MAX_ENTRIES`` files are kept, and paths are
cut to ``MAX_PATH_CHARS``. The parsers are pure functions of recorded text.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from diag.model import OpenFile
from diag.probes.procfs import ProcFS, read_capped

MIN_BYTES = 16 << 20
MAX_ENTRIES = 64
MAX_PATH_CHARS = 512
MAX_FDS = 4096
FDINFO_LIMIT_BYTES = 4096
MAPS_LIMIT_BYTES = 2 << 20
SMAPS_LIMIT_BYTES = 8 << 20

# Mapped files that are code or system data, never what a job loads.
_LIBRARY_RE = re.compile(r"\.so(?:\.[0-9][0-9.]*)?$|/locale-archive$|\.pyc$|/python[0-9.]*$")
_SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/", "/memfd:", "/SYSV", "/anon_hugepage")
_DELETED = " (deleted)"


class Mapping(NamedTuple):
    start: int
    end: int
    path: str

    @property
    def size(self) -> int:
        return self.end - self.start


def cap_path(path: str) -> str:
    """``path`` cut to ``MAX_PATH_CHARS``, keeping its end (the file name says what it is)."""
    if len(path) <= MAX_PATH_CHARS:
        return path
    return "..." + path[-(MAX_PATH_CHARS - 3) :]


def parse_fdinfo(text: str) -> Tuple[Optional[int], Optional[int]]:
    """``(pos, flags)`` of /proc/P/fdinfo/N (``pos`` decimal, ``flags`` octal); None: absent."""
    pos = flags = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        try:
            if key == "pos":
                pos = int(value)
            elif key == "flags":
                flags = int(value, 8)
        except ValueError:
            continue
    return pos, flags


def is_candidate_path(path: str) -> bool:
    """A regular file worth reporting: not a device, not /proc, not a library."""
    bare = path[: -len(_DELETED)] if path.endswith(_DELETED) else path
    return (
        bare.startswith("/")
        and not bare.startswith(_SKIP_PREFIXES)
        and not (_LIBRARY_RE.search(bare))
    )


def parse_maps(text: str) -> List[Mapping]:
    """The file-backed mappings of /proc/P/maps (``start-end perms offset dev inode path``)."""
    out: List[Mapping] = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        lo, _, hi = fields[0].partition("-")
        try:
            out.append(Mapping(int(lo, 16), int(hi, 16), fields[5].rstrip("\n")))
        except ValueError:
            continue
    return out


def big_mappings(mappings: Iterable[Mapping], min_bytes: int = MIN_BYTES) -> Dict[str, int]:
    """Mapped size per path, for the paths mapped for at least ``min_bytes`` in all (a file
    mapped in several pieces counts once), libraries and devices left out."""
    sizes: Dict[str, int] = {}
    for m in mappings:
        if is_candidate_path(m.path):
            sizes[m.path] = sizes.get(m.path, 0) + m.size
    return {p: n for p, n in sizes.items() if n >= min_bytes}


_SMAPS_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")


def parse_smaps_rss(text: str, paths: Sequence[str]) -> Dict[str, int]:
    """Rss bytes per path (summed over its mappings) from /proc/P/smaps, for ``paths`` only."""
    wanted = set(paths)
    out: Dict[str, int] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        header = _SMAPS_HEADER.match(line)
        if header is not None:
            path = header.group(3)
            current = path if path in wanted else None
            continue
        if current is not None and line.startswith("Rss:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                scale = 1024 if len(parts) < 3 or parts[2].lower() == "kb" else 1
                out[current] = out.get(current, 0) + int(parts[1]) * scale
    return out


def _read_bounded(path: str, limit: int) -> Optional[str]:
    raw = read_capped(path, limit)
    return None if raw is None else raw.decode("utf-8", "replace")


def _open_fds(procfs: ProcFS, pid: int, min_bytes: int) -> List[OpenFile]:
    out: List[OpenFile] = []
    seen = set()
    for fd in procfs.fds(pid)[:MAX_FDS]:
        target = procfs.readlink(pid, "fd", str(fd))
        if target is None or not is_candidate_path(target):
            continue
        try:
            st = os.stat(procfs.spath(pid, "fd", str(fd)))
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size < min_bytes:
            continue
        info = _read_bounded(procfs.spath(pid, "fdinfo", str(fd)), FDINFO_LIMIT_BYTES)
        pos, flags = parse_fdinfo(info or "")
        kind = "write" if flags is not None and flags & 0o3 in (1, 2) else "read"
        if (target, kind) in seen:
            continue
        seen.add((target, kind))
        out.append(
            OpenFile(
                path=cap_path(target),
                size_bytes=st.st_size,
                pos_bytes=pos,
                device=f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}",
                kind=kind,  # type: ignore[arg-type]
                fd=fd,
            )
        )
        if len(out) >= MAX_ENTRIES:
            break
    return out


def _mapped(procfs: ProcFS, pid: int, min_bytes: int, limit: int) -> List[OpenFile]:
    if limit <= 0:
        return []
    maps = _read_bounded(procfs.spath(pid, "maps"), MAPS_LIMIT_BYTES)
    sizes = big_mappings(parse_maps(maps or ""), min_bytes)
    if not sizes:
        return []
    chosen = sorted(sizes, key=lambda p: -sizes[p])[:limit]
    smaps = _read_bounded(procfs.spath(pid, "smaps"), SMAPS_LIMIT_BYTES)
    rss = parse_smaps_rss(smaps or "", chosen) if smaps is not None else {}
    return [
        OpenFile(
            path=cap_path(p),
            size_bytes=sizes[p],
            resident_bytes=rss.get(p) if smaps is not None else None,
            kind="mmap",
        )
        for p in sorted(chosen)
    ]


def read_open_files(
    procfs: ProcFS, pid: int, min_bytes: int = MIN_BYTES, max_entries: int = MAX_ENTRIES
) -> Tuple[OpenFile, ...]:
    """The big files ``pid`` holds open (fds) or has mapped, at most ``max_entries``."""
    fds = _open_fds(procfs, pid, min_bytes)[:max_entries]
    return tuple(fds + _mapped(procfs, pid, min_bytes, max_entries - len(fds)))
