"""Reading a live CPython's memory: where its runtime is, which version it is, typed reads.

``/proc/PID/mem`` (through the injectable ``ProcFS`` root) is read with ``pread``, one syscall
per struct, without stopping the process - what ``py-spy dump --nonblocking`` does with
``process_vm_readv``. Access needs the same right as py-spy (root or ``CAP_SYS_PTRACE``, or the
same user under ``ptrace_scope`` 0); without it the caller falls back to py-spy, whose message
explains the remedy.

The runtime is found from the ELF dynamic symbols of the mapped libpython or python binary
(``diag.probes.cpython.elf_symbols``), cached per file (device, inode, size, mtime): the ranks
of a job run one binary, so a snapshot of 8 ranks parses it once. The version is read from the
target's own ``Py_Version`` (3.11+), never guessed from a file name.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from diag.probes.cpython.elf_symbols import ElfSymbols, dynamic_symbols, load_base, mapped_python
from diag.probes.procfs import ProcFS

_SYMBOLS = ("_PyRuntime", "PyCode_Type", "Py_Version", "Py_Initialize")
_RUNTIME_SYMBOLS = ("_PyRuntime", "PyCode_Type", "Py_Version")
_FileKey = Tuple[int, int, int, int]
_symbol_cache: Dict[_FileKey, Optional[ElfSymbols]] = {}


class RemoteReadError(Exception):
    """A read of the target's memory failed or gave something that cannot be a Python struct."""


class NotCPython(Exception):
    """No file the process maps defines ``Py_Initialize``: there is no CPython in it (a shell,
    a launcher binary), which py-spy would only confirm at the cost of a run."""


@dataclass(frozen=True)
class Runtime:
    """Addresses in one process: ``_PyRuntime``, ``PyCode_Type`` and the version they belong to."""

    runtime_addr: int
    code_type_addr: int
    version: Tuple[int, int]


class RemoteMemory:
    """``pread`` on ``/proc/PID/mem``; every failure is a ``RemoteReadError``."""

    def __init__(self, procfs: ProcFS, pid: int) -> None:
        try:
            self._fd = os.open(procfs.path(pid) / "mem", os.O_RDONLY)
        except OSError as exc:
            raise RemoteReadError(f"cannot open the memory of pid {pid}: {exc.strerror}") from exc

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def read(self, addr: int, size: int) -> bytes:
        if addr <= 0 or size <= 0:
            raise RemoteReadError(f"bad read of {size} bytes at {addr:#x}")
        try:
            data = os.pread(self._fd, size, addr)
        except (OSError, OverflowError) as exc:
            raise RemoteReadError(f"read of {size} bytes at {addr:#x} failed: {exc}") from exc
        if len(data) != size:
            raise RemoteReadError(f"short read at {addr:#x}")
        return data

    def ptr(self, addr: int) -> int:
        return int(struct.unpack("<Q", self.read(addr, 8))[0])


def forget_symbols() -> None:
    """Empty the per-file symbol cache (a benchmark's "first sample" must parse again)."""
    _symbol_cache.clear()


def _symbols_of(procfs: ProcFS, pid: int, path: str) -> Optional[ElfSymbols]:
    # The binary as the target sees it (its mount namespace), through /proc/PID/root.
    host_path = procfs.path(pid) / "root" / path.lstrip("/")
    try:
        st = os.stat(host_path)
    except OSError:
        return None
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _symbol_cache:
        return _symbol_cache[key]
    try:
        with open(host_path, "rb") as f:

            def read(offset: int, size: int) -> bytes:
                f.seek(offset)
                return f.read(size)

            symbols = dynamic_symbols(read, _SYMBOLS)
    except (OSError, ValueError, OverflowError):
        symbols = None
    _symbol_cache[key] = symbols
    return symbols


def locate_runtime(procfs: ProcFS, pid: int, memory: RemoteMemory) -> Optional[Runtime]:
    """The runtime of ``pid``'s interpreter, or None (a CPython older than 3.11, or one this
    cannot place); raises ``NotCPython`` when nothing it maps is CPython."""
    maps = procfs.try_read_text(pid, "maps")
    if maps is None:
        raise RemoteReadError(f"cannot read the memory map of pid {pid}")
    python = False
    for path in mapped_python(maps, procfs.readlink(pid, "exe")):
        symbols = _symbols_of(procfs, pid, path)
        python = python or (symbols is not None and "Py_Initialize" in symbols.values)
        if symbols is None or not all(name in symbols.values for name in _RUNTIME_SYMBOLS):
            continue
        start = load_base(maps, path)
        if start is None:
            continue
        base = start - symbols.first_load_vaddr
        hexversion = memory.ptr(base + symbols.values["Py_Version"]) & 0xFFFFFFFF
        return Runtime(
            runtime_addr=base + symbols.values["_PyRuntime"],
            code_type_addr=base + symbols.values["PyCode_Type"],
            version=(hexversion >> 24, (hexversion >> 16) & 0xFF),
        )
    if not python:
        raise NotCPython(f"pid {pid} maps no CPython")
    return None


def maps_cpython(procfs: ProcFS, pid: int) -> bool:
    """A file ``pid`` maps defines ``Py_Initialize``: it runs CPython, whatever a torn read of
    its memory says (the symbols are the cached ones ``locate_runtime`` parsed)."""
    maps = procfs.try_read_text(pid, "maps") or ""
    for path in mapped_python(maps, procfs.readlink(pid, "exe")):
        symbols = _symbols_of(procfs, pid, path)
        if symbols is not None and "Py_Initialize" in symbols.values:
            return True
    return False


def warm_symbols(procfs: ProcFS, pid: int) -> None:
    """Parse the symbols of ``pid``'s Python binaries into the cache, reading no memory: done
    before forking workers, so that each of them does not parse the same file again."""
    maps = procfs.try_read_text(pid, "maps") or ""
    for path in mapped_python(maps, procfs.readlink(pid, "exe")):
        if _symbols_of(procfs, pid, path) is not None:
            return
