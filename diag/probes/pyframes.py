"""Every Python thread's stack of a CPython 3.11-3.13 process, read by diag itself.

Why not always py-spy: a ``py-spy dump`` of a 64-thread rank makes ~12,000 small reads (every
frame's code object, file name, function name and line table, again for every frame) plus its
own start-up; a snapshot of 8 ranks on a small host is then CPU-bound. The same read done here
makes one read per thread state and per frame, and reads each code object and string once per
dump, so it costs a fraction, and the binary's symbols are parsed once for all the ranks.

What it reads (offsets in ``diag.probes.cpython_layouts``): ``_PyRuntime`` -> the interpreter
-> its thread states (native thread id, ``pthread`` id, current frame) -> each
``_PyInterpreterFrame`` (code object, last instruction, previous frame; 3.12+ C-stack shim
frames skipped) -> the code object's qualified name, file name, first line and location table.
Frames come innermost first with the names py-spy gives (``qualname``). A thread started by
``threading`` is named from its ``Thread`` object (``self`` of the outermost
``Thread._bootstrap`` frame); the thread whose id is the pid is ``MainThread``.

The process is not stopped (like ``py-spy dump --nonblocking``): a running thread may change
its stack under the read. Every read is checked (code objects must have ``PyCode_Type``, thread
ids must be threads /proc lists, chains are bounded and loop-free) and any inconsistency
raises ``RemoteReadError``, on which the caller uses py-spy instead. Nothing is ever guessed.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from diag.model import Frame
from diag.probes.cpython_layouts import FRAME_OWNED_BY_CSTACK, Layout, layout_for
from diag.probes.linetable import line_of
from diag.probes.procfs import ProcFS
from diag.probes.pymem import RemoteMemory, RemoteReadError, Runtime, locate_runtime
from diag.probes.pyobjects import ObjectReader
from diag.probes.pyspy_dump import PyThreadDump

_MAX_THREADS = 10_000
_MAX_DEPTH = 5_000


@dataclass(frozen=True)
class _Code:
    qualname: str
    filename: str
    first_line: int
    linetable: bytes
    code_start: int


class StackReader:
    """One dump of one process: caches live for this dump only (addresses get reused)."""

    def __init__(self, memory: RemoteMemory, runtime: Runtime, layout: Layout) -> None:
        self._mem = memory
        self._rt = runtime
        self._lay = layout
        self._objects = ObjectReader(memory, layout)
        self._codes: Dict[int, _Code] = {}

    def threads(self, pid: int, live_tids: Set[int]) -> List[PyThreadDump]:
        lay = self._lay
        interp = self._mem.ptr(self._rt.runtime_addr + lay.runtime_interpreters_head)
        tstate = self._mem.ptr(interp + lay.interp_threads_head) if interp else 0
        if not tstate:
            raise RemoteReadError("no Python thread state (interpreter starting or exiting)")
        holder = self._gil_holder(interp)
        out: List[PyThreadDump] = []
        seen: Set[int] = set()
        while tstate:
            if tstate in seen or len(seen) >= _MAX_THREADS:
                raise RemoteReadError("thread list loops (changed during the read)")
            seen.add(tstate)
            size = lay.tstate_native_thread_id + 8
            raw = self._mem.read(tstate, max(size, (lay.tstate_current_frame or 0) + 8))
            (native_id,) = struct.unpack_from("<Q", raw, lay.tstate_native_thread_id)
            if native_id not in live_tids:
                raise RemoteReadError(f"thread state names thread {native_id}, not in /proc")
            frames, thread_obj = self._frames(self._current_frame(raw))
            out.append(
                PyThreadDump(
                    os_thread_id=int(native_id),
                    thread_id=int(struct.unpack_from("<Q", raw, lay.tstate_thread_id)[0]),
                    thread_name=self._thread_name(pid, int(native_id), thread_obj),
                    active=False,
                    owns_gil=holder == tstate,
                    frames=tuple(frames),
                )
            )
            (tstate,) = struct.unpack_from("<Q", raw, lay.tstate_next)
        return out

    def _gil_holder(self, interp: int) -> Optional[int]:
        lay = self._lay
        if lay.runtime_gil is not None:
            gil = self._rt.runtime_addr + lay.runtime_gil
        else:
            gil = self._mem.ptr(interp + (lay.interp_gil or 0))
        if not gil:
            return None
        (locked,) = struct.unpack("<i", self._mem.read(gil + lay.gil_locked, 4))
        if not locked:
            return None
        return self._mem.ptr(gil + lay.gil_last_holder) or None

    def _current_frame(self, raw: bytes) -> int:
        lay = self._lay
        if lay.tstate_current_frame is not None:
            return int(struct.unpack_from("<Q", raw, lay.tstate_current_frame)[0])
        (cframe,) = struct.unpack_from("<Q", raw, lay.tstate_cframe or 0)
        return self._mem.ptr(cframe + (lay.cframe_current_frame or 0)) if cframe else 0

    def _frames(self, frame: int) -> Tuple[List[Frame], Optional[int]]:
        """Frames innermost first, and the ``Thread`` object of an outermost ``_bootstrap``."""
        lay = self._lay
        frames: List[Frame] = []
        seen: Set[int] = set()
        thread_obj: Optional[int] = None
        outermost_self = 0
        while frame:
            if frame in seen or len(seen) >= _MAX_DEPTH:
                raise RemoteReadError("frame chain loops (changed during the read)")
            seen.add(frame)
            raw = self._mem.read(frame, lay.frame_size)
            code_addr, previous, instr = (
                struct.unpack_from("<Q", raw, off)[0]
                for off in (lay.frame_code, lay.frame_previous, lay.frame_instr)
            )
            if lay.version >= (3, 12) and raw[lay.frame_owner] == FRAME_OWNED_BY_CSTACK:
                frame = previous
                continue
            code = self._code(code_addr)
            lasti = (instr - code.code_start) // 2
            line = line_of(code.linetable, code.first_line, lasti)
            frames.append(Frame(name=code.qualname, filename=code.filename, line=line or 0))
            outermost_self = struct.unpack_from("<Q", raw, lay.frame_localsplus)[0]
            frame = previous
        if frames and frames[-1].name == "Thread._bootstrap":
            thread_obj = outermost_self or None
        return frames, thread_obj

    def _code(self, addr: int) -> _Code:
        cached = self._codes.get(addr)
        if cached is not None:
            return cached
        lay = self._lay
        raw = self._mem.read(addr, lay.code_adaptive)
        if struct.unpack_from("<Q", raw, 8)[0] != self._rt.code_type_addr:
            raise RemoteReadError(f"object at {addr:#x} is not a code object")
        ptrs = {
            off: struct.unpack_from("<Q", raw, off)[0]
            for off in (lay.code_qualname, lay.code_filename, lay.code_linetable)
        }
        code = _Code(
            qualname=self._objects.string(ptrs[lay.code_qualname]),
            filename=self._objects.string(ptrs[lay.code_filename]),
            first_line=int(struct.unpack_from("<i", raw, lay.code_firstlineno)[0]),
            linetable=self._objects.bytes_(ptrs[lay.code_linetable]),
            code_start=addr + lay.code_adaptive,
        )
        self._codes[addr] = code
        return code

    def _thread_name(self, pid: int, native_id: int, thread_obj: Optional[int]) -> Optional[str]:
        if native_id == pid:
            return "MainThread"
        if thread_obj is None:
            return None
        try:
            name = self._objects.attribute(thread_obj, "_name")
            return self._objects.string(name) if name else None
        except RemoteReadError:
            return None  # a name is a nicety; the stack stands without it


def read_stacks(procfs: ProcFS, pid: int) -> Optional[List[PyThreadDump]]:
    """All Python threads of ``pid``, or None when this reader does not handle its Python.

    Raises ``RemoteReadError`` when it handles it but the read failed or was inconsistent.
    """
    with RemoteMemory(procfs, pid) as memory:
        runtime = locate_runtime(procfs, pid, memory)
        layout = layout_for(runtime.version) if runtime is not None else None
        if runtime is None or layout is None:
            return None
        live = set(procfs.tids(pid))
        dumps = StackReader(memory, runtime, layout).threads(pid, live)
    states = {}
    for dump in dumps:
        stat = procfs.try_read_text(pid, "task", str(dump.os_thread_id), "stat") or ""
        states[dump.os_thread_id] = stat.rsplit(")", 1)[-1].split()[:1] == ["R"]
    return [dataclasses.replace(d, active=states[d.os_thread_id]) for d in dumps]
