"""Addresses of exported symbols (``_PyRuntime``, ``PyCode_Type``...) in a running process.

Reading a Python process's stacks starts at ``_PyRuntime``, a global whose address is its ELF
dynamic symbol's value plus the load base of the binary or ``libpythonX.Y.so`` that defines it.
The lookup is a pure function of the file's bytes (``dynamic_symbols``); the load base comes from
``/proc/PID/maps`` (``load_base``). A full ELF library would do, but importing one costs more
than a whole stack read (~40 ms for pyelftools), and this needs only the section headers, the
dynamic symbol table and the first ``PT_LOAD`` segment: the format is fixed by the ELF spec.
Only 64-bit little-endian ELF is handled (x86_64, aarch64); anything else gives ``None`` and
the caller falls back to py-spy.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

# read(offset, size) -> bytes: the file, or a bytes object in tests.
ReadAt = Callable[[int, int], bytes]

_SHT_DYNSYM = 11
_PT_LOAD = 1
_SYM_SIZE = 24
_PAGE_MASK = ~0xFFF


class ElfSymbols(NamedTuple):
    """What a binary tells about itself: symbol values and the vaddr of its offset-0 segment."""

    values: Dict[str, int]
    first_load_vaddr: int


def dynamic_symbols(read: ReadAt, names: Iterable[str]) -> Optional[ElfSymbols]:
    """The ``st_value`` of each of ``names`` defined in the file's .dynsym; None if not ELF64 LE.

    Reads only the headers and the two tables (a libpython is ~20 MB, its .dynsym ~300 kB).
    """
    head = read(0, 64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    e_phoff, e_shoff = struct.unpack_from("<QQ", head, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", head, 0x36)
    first_vaddr = _first_load_vaddr(read(e_phoff, e_phentsize * e_phnum), e_phentsize, e_phnum)
    sections = _sections(read(e_shoff, e_shentsize * e_shnum), e_shentsize, e_shnum)
    found: Dict[str, int] = {}
    for sh_type, offset, size, link in sections:
        if sh_type != _SHT_DYNSYM or link >= len(sections):
            continue
        _, str_off, str_size, _ = sections[link]
        strtab = read(str_off, str_size)
        symtab = read(offset, size)
        for name in names:
            value = _lookup(symtab, strtab, name)
            if value:
                found[name] = value
    if first_vaddr is None:
        return None
    return ElfSymbols(values=found, first_load_vaddr=first_vaddr)


def _first_load_vaddr(data: bytes, phentsize: int, phnum: int) -> Optional[int]:
    for i in range(phnum):
        base = i * phentsize
        if base + 56 > len(data):
            return None
        p_type, _flags, p_offset, p_vaddr = struct.unpack_from("<IIQQ", data, base)
        if p_type == _PT_LOAD and p_offset == 0:
            return int(p_vaddr) & _PAGE_MASK
    return None


def _sections(data: bytes, shentsize: int, shnum: int) -> List[Tuple[int, int, int, int]]:
    out = []
    for i in range(shnum):
        base = i * shentsize
        if base + 64 > len(data):
            break
        _name, sh_type = struct.unpack_from("<II", data, base)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, base + 0x18)
        (sh_link,) = struct.unpack_from("<I", data, base + 0x28)
        out.append((sh_type, sh_offset, sh_size, sh_link))
    return out


def _lookup(symtab: bytes, strtab: bytes, name: str) -> Optional[int]:
    """Find the name in the string table, then the symbol whose st_name points at it.

    Both searches run in C (``bytes.find``); walking ~10,000 symbols in Python would not.
    """
    needle = b"\0" + name.encode() + b"\0"
    start = 0
    while True:
        at = strtab.find(needle, start)
        if at < 0:
            return None
        key = struct.pack("<I", at + 1)
        pos = symtab.find(key)
        while pos >= 0:
            if pos % _SYM_SIZE == 0:
                (value,) = struct.unpack_from("<Q", symtab, pos + 8)
                if value:
                    return int(value)
            pos = symtab.find(key, pos + 1)
        start = at + 1


def load_base(maps_text: str, path: str) -> Optional[int]:
    """The start of ``path``'s offset-0 mapping in a /proc/PID/maps text, or None.

    Found with ``str.find`` on the path, then the line's five fields (address range, perms,
    offset, device, inode): a multi-line regex over a rank's ~250-line map took 0.2 ms, 40 %
    of locating its runtime, once per rank per sample."""
    text = maps_text if maps_text.endswith("\n") else maps_text + "\n"
    needle = f" {path}\n"
    pos = text.find(needle)
    while pos >= 0:
        fields = text[text.rfind("\n", 0, pos) + 1 : pos].split()
        if len(fields) == 5 and not fields[2].strip("0"):
            start, _, _ = fields[0].partition("-")
            try:
                return int(start, 16)
            except ValueError:
                return None
        pos = text.find(needle, pos + 1)
    return None


def mapped_python(maps_text: str, exe: Optional[str] = None) -> List[str]:
    """Files that may define ``_PyRuntime``: the mapped libpython(s), then the executable.

    Only lines naming a libpython are looked at (``str.find``, in C): a torch process maps
    ~1,000 files, nearly all under a ``python3.X`` directory. The executable comes from
    ``/proc/PID/exe`` (``exe``), so a renamed or embedding binary is tried too.
    """
    paths: Dict[str, None] = {}
    pos = maps_text.find("/libpython")
    while pos >= 0:
        start = maps_text.rfind("\n", 0, pos) + 1
        end = maps_text.find("\n", pos)
        end = len(maps_text) if end < 0 else end
        parts = maps_text[start:end].split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            paths[parts[5]] = None
        pos = maps_text.find("/libpython", end)
    if exe and exe.startswith("/") and not exe.endswith(" (deleted)"):
        paths[exe] = None
    return list(paths)
