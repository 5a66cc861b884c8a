"""Which function of which library a native program counter lies in: ``/proc/PID/maps`` to the
mapped file, the file's ELF symbol table to the enclosing function.

Why: a thread burning a core inside a communication library's progress loop (MPI's
``opal_progress``, UCX's ``ucp_worker_progress``, a CUDA synchronize spinning on the host)
waits for a message; its Python stack, if it has one, only shows the line that called in. The
PC says where the CPU really goes, and the packs of ``diag.frameworks`` say which places are
progress engines.

Everything the target controls is bounded: the maps text (``MAPS_MAX_BYTES``), the symbol table
read per file (``SYMTAB_MAX_BYTES``; a bigger one gives the library without a symbol), a name
(``NAME_MAX_CHARS``). A file is read through ``/proc/PID/map_files`` (the very object mapped,
even if the path was replaced) opened non-blocking, and only when it is a regular file whose
inode is the mapping's. Tables are cached by (device, inode, mtime, size) for the capture
(``SymbolCache``): the ranks of a job share their libraries. Only 64-bit little-endian ELF.
"""

from __future__ import annotations

import bisect
import os
import stat
import struct
import threading
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Tuple

MAPS_MAX_BYTES = 2 << 20  # a torch rank's map is ~150 kB
MAPS_MAX_LINES = 20000
# ~350k symbols, parsed in ~0.13 s once a capture: libtorch_cpu's .symtab (12 MB) is over it and
# its .dynsym (1.8 MB) is read instead; libmpi's whole table fits many times.
SYMTAB_MAX_BYTES = 8 << 20
NAME_MAX_CHARS = 160
CACHE_MAX_FILES = 64

_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_PT_LOAD = 1
_STT_FUNC = 2
_STT_GNU_IFUNC = 10
_SYM = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size


class Mapping(NamedTuple):
    """One executable file mapping of a process."""

    start: int
    end: int
    offset: int
    inode: int
    path: str
    range_text: str  # "7f12-7f34": its name under /proc/PID/map_files


def parse_maps(text: str) -> List[Mapping]:
    """The executable, file-backed mappings of a /proc/PID/maps text, sorted by start."""
    out: List[Mapping] = []
    for n, line in enumerate(text.splitlines()):
        if n >= MAPS_MAX_LINES:
            break
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
            continue
        start_text, _, end_text = parts[0].partition("-")
        try:
            start, end = int(start_text, 16), int(end_text, 16)
            offset, inode = int(parts[2], 16), int(parts[4])
        except ValueError:
            continue
        out.append(Mapping(start, end, offset, inode, parts[5], parts[0]))
    out.sort()
    return out


def find_mapping(maps: List[Mapping], addr: int) -> Optional[Mapping]:
    at = bisect.bisect_right(maps, (addr, 1 << 64)) - 1
    if at >= 0 and maps[at].start <= addr < maps[at].end:
        return maps[at]
    return None


def library_name(path: str) -> str:
    """How a location names its file: its base name, capped, printable characters only (the
    target names its files; a sentence and a terminal show this): "libopen-pal.so.40.30.2"."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith(" (deleted)"):
        name = name[: -len(" (deleted)")]
    return "".join(c for c in name[:NAME_MAX_CHARS] if c.isprintable())


@dataclass
class _Table:
    """A file's functions, sorted by start address, and how to read a name lazily."""

    starts: List[int]
    ends: List[int]
    names: List[int]  # st_name offsets into the string table
    strtab_off: int
    strtab_size: int
    loads: List[Tuple[int, int, int]]  # PT_LOAD (p_offset, p_filesz, p_vaddr)
    resolved: Dict[int, str]


def _read_at(fd: int, offset: int, size: int) -> bytes:
    chunks: List[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _load_table(fd: int) -> Optional[_Table]:
    """The function symbols of an open ELF64 LE file: .symtab when it has one (statics too),
    else .dynsym. None when it is no such file or its table is over the cap."""
    head = _read_at(fd, 0, 64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    e_phoff, e_shoff = struct.unpack_from("<QQ", head, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", head, 0x36)
    if e_phnum > 256 or e_shnum > 4096 or e_phentsize < 56 or e_shentsize < 64:
        return None
    ph = _read_at(fd, e_phoff, e_phentsize * e_phnum)
    loads = []
    for i in range(len(ph) // e_phentsize):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", ph, i * e_phentsize
        )
        if p_type == _PT_LOAD:
            loads.append((p_offset, p_filesz, p_vaddr))
    sh = _read_at(fd, e_shoff, e_shentsize * e_shnum)
    sections = []
    for i in range(len(sh) // e_shentsize):
        base = i * e_shentsize
        (sh_type,) = struct.unpack_from("<I", sh, base + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", sh, base + 0x18)
        (sh_link,) = struct.unpack_from("<I", sh, base + 0x28)
        sections.append((sh_type, sh_offset, sh_size, sh_link))
    for wanted in (_SHT_SYMTAB, _SHT_DYNSYM):
        for sh_type, offset, size, link in sections:
            if sh_type != wanted or link >= len(sections) or size > SYMTAB_MAX_BYTES:
                continue
            return _functions(_read_at(fd, offset, size), sections[link], loads)
    return _Table([], [], [], 0, 0, loads, {})


def _functions(
    data: bytes, strtab: Tuple[int, int, int, int], loads: List[Tuple[int, int, int]]
) -> _Table:
    rows = sorted(
        (value, value + size, name)
        for name, info, _, shndx, value, size in _SYM.iter_unpack(data[: len(data) // 24 * 24])
        if size and shndx and (info & 0xF) in (_STT_FUNC, _STT_GNU_IFUNC)
    )
    return _Table(
        starts=[r[0] for r in rows],
        ends=[r[1] for r in rows],
        names=[r[2] for r in rows],
        strtab_off=strtab[1],
        strtab_size=strtab[2],
        loads=loads,
        resolved={},
    )


class SymbolCache:
    """Function tables by file identity, for one capture (bounded to ``CACHE_MAX_FILES``)."""

    def __init__(self) -> None:
        self._tables: Dict[Tuple[int, int, int, int], Optional[_Table]] = {}
        # Attributions of several processes run at once (``NativeProbe.begin``) and a job's
        # ranks share their libraries: one loads a table, the others wait for it (a lock a
        # file, so a load stuck on one file holds up only the lookups in that file).
        self._lock = threading.Lock()
        self._loading: Dict[Tuple[int, int, int, int], threading.Lock] = {}

    def symbol(self, pid: int, mapping: Mapping, addr: int, proc_root: str = "/proc") -> str:
        """The function of ``mapping``'s file enclosing ``addr``; "" when none is known."""
        fd = _open_mapped(pid, mapping, proc_root)
        if fd is None:
            return ""
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            table = self._table(key, fd)
            if table is None:
                return ""
            return _lookup(fd, table, mapping, addr)
        except (OSError, struct.error):
            return ""
        finally:
            os.close(fd)

    def _table(self, key: Tuple[int, int, int, int], fd: int) -> Optional[_Table]:
        if key in self._tables:
            return self._tables.get(key)
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            if key not in self._tables:
                table = _load_table(fd)
                with self._lock:
                    if len(self._tables) >= CACHE_MAX_FILES:
                        self._tables.pop(next(iter(self._tables)))
                    self._tables[key] = table
                    self._loading.pop(key, None)
            return self._tables.get(key)


def _open_mapped(pid: int, mapping: Mapping, proc_root: str) -> Optional[int]:
    """An fd on the mapped file itself, or None: never a fifo or device put at its path."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    for path in (f"{proc_root}/{pid}/map_files/{mapping.range_text}", mapping.path):
        try:
            fd = os.open(path, flags)
        except OSError:
            continue
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_ino == mapping.inode:
            return fd
        os.close(fd)
    return None


def _lookup(fd: int, table: _Table, mapping: Mapping, addr: int) -> str:
    file_offset = addr - mapping.start + mapping.offset
    vaddr = None
    for p_offset, p_filesz, p_vaddr in table.loads:
        if p_offset <= file_offset < p_offset + p_filesz:
            vaddr = file_offset - p_offset + p_vaddr
            break
    if vaddr is None:
        return ""
    at = bisect.bisect_right(table.starts, vaddr) - 1
    # Symbols may nest (an alias over a bigger one): look back a few for one that encloses.
    for i in range(at, max(at - 8, -1), -1):
        if table.starts[i] <= vaddr < table.ends[i]:
            return _name(fd, table, table.names[i])
    return ""


def _name(fd: int, table: _Table, st_name: int) -> str:
    hit = table.resolved.get(st_name)
    if hit is not None:
        return hit
    if st_name >= table.strtab_size:
        return ""
    raw = _read_at(fd, table.strtab_off + st_name, min(NAME_MAX_CHARS, table.strtab_size - st_name))
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    # Only printable names: a sentence shows it, and the file is the target's.
    name = "".join(c for c in text if c.isprintable())[:NAME_MAX_CHARS]
    if len(table.resolved) < 4096:
        table.resolved[st_name] = name
    return name
