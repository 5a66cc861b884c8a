"""Every Python thread's stack of a CPython 3.11-3.13 process, read by diag itself.

Why not always py-spy: a ``py-spy dump`` of a 64-thread rank makes ~12,000 small reads (every
frame's code object, file name, function name and line table, again for every frame) plus its
own start-up; a snapshot of 8 ranks on a small host is then CPU-bound. The same read done here
makes one read per thread state and per frame, and reads each code object and string once per
dump, so it costs a fraction, and the binary's symbols are parsed once for all the ranks.

What it reads (offsets in ``diag.probes.cpython.layouts``): ``_PyRuntime`` -> the interpreter
-> its thread states (native thread id, ``pthread`` id, current frame) -> each
``_PyInterpreterFrame`` (code object, last instruction, previous frame; 3.12+ C-stack shim
frames skipped) -> the code object's qualified name, file name, first line and location table.
Frames come innermost first with the names py-spy gives (``qualname``). A thread started by
``threading`` is named from its ``Thread`` object (``self`` of the outermost
``Thread._bootstrap`` frame); the thread whose id is the pid is ``MainThread``. Thread ids are
the ones /proc lists here, also for a process in a container's PID namespace (mapped through
``NSpid``).

The process is not stopped (like ``py-spy dump --nonblocking``): a running thread may change
its stack under the read. Every read is checked (code objects must have ``PyCode_Type``, thread
ids must be threads /proc lists, chains are bounded and loop-free) and any inconsistency
raises ``RemoteReadError``, on which the caller uses py-spy instead. Nothing is ever guessed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import msgspec

from diag.model import Frame
from diag.probes.cpython.layouts import FRAME_OWNED_BY_CSTACK, Layout, layout_for
from diag.probes.cpython.linetable import line_of
from diag.probes.cpython.pymem import RemoteMemory, RemoteReadError, Runtime, locate_runtime
from diag.probes.cpython.pyobjects import ObjectReader
from diag.probes.procfs import ProcFS
from diag.probes.pyspy_dump import MAX_FRAMES, MAX_THREADS, PyThreadDump, frames_cut_marker
from diag.probes.threads import namespace_tids, parse_thread_stat

_MAX_THREAD_STATES = 10_000  # a longer list is a loop or garbage
_MAX_DEPTH = 5_000  # links followed in one chain (shim frames included): beyond, garbage
_MAX_WINDOW_BYTES = 4 << 20
# A data-stack chunk's header (previous, size, top) and the slot the root chunk skips: a window
# longer than this holds live frames (CPython's push_chunk / _PyThreadState_PopFrame).
_CHUNK_EMPTY_BYTES = 32


class FrameChainCorrupt(RemoteReadError):
    """A frame chain that loops or does not end: torn by a running thread, or forged."""


@dataclass(frozen=True)
class _Code:
    qualname: str
    filename: str
    first_line: int
    linetable: bytes
    code_start: int


class StackReader:
    """One dump of one process: caches live for this dump only (addresses get reused)."""

    def __init__(
        self, memory: RemoteMemory, runtime: Runtime, layout: Layout, procfs: ProcFS
    ) -> None:
        self._procfs = procfs
        self._mem = memory
        self._rt = runtime
        self._lay = layout
        self._objects = ObjectReader(memory, layout)
        self._codes: Dict[int, _Code] = {}
        # (code object, instruction) -> its Frame: threads parked at one place share it.
        self._located: Dict[Tuple[int, int], Frame] = {}
        self._ns_map: Optional[Dict[int, int]] = None  # see _host_tid
        self._tstate_size = 8 + max(
            layout.tstate_native_thread_id,
            layout.tstate_datastack_top,
            layout.tstate_current_frame or 0,
            layout.tstate_cframe or 0,
            layout.tstate_next,
        )

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
            if tstate in seen or len(seen) >= _MAX_THREAD_STATES:
                raise RemoteReadError("thread list loops (changed during the read)")
            if len(out) >= MAX_THREADS:  # budget: the rest is not read (truncation_of says so)
                break
            seen.add(tstate)
            raw = self._mem.read(tstate, self._tstate_size)
            (native_id,) = struct.unpack_from("<Q", raw, lay.tstate_native_thread_id)
            (tstate_next,) = struct.unpack_from("<Q", raw, lay.tstate_next)
            if native_id == 0:  # created, its OS thread not started yet: nothing to show
                tstate = tstate_next
                continue
            tid = self._host_tid(pid, int(native_id), live_tids)
            frames, thread_obj = self._frames(self._current_frame(raw), self._stack_window(raw))
            out.append(
                PyThreadDump(
                    os_thread_id=tid,
                    thread_id=int(struct.unpack_from("<Q", raw, lay.tstate_thread_id)[0]),
                    thread_name=self._thread_name(pid, tid, thread_obj),
                    active=False,
                    owns_gil=holder == tstate,
                    frames=tuple(frames),
                )
            )
            tstate = tstate_next
        return out

    def _stack_window(self, raw: bytes) -> Tuple[int, bytes]:
        """The used part of the thread's current frame-stack chunk, read at once: most of its
        frames lie there, so one read replaces one read per frame."""
        lay = self._lay
        (chunk,) = struct.unpack_from("<Q", raw, lay.tstate_datastack_chunk)
        (top,) = struct.unpack_from("<Q", raw, lay.tstate_datastack_top)
        if not chunk or not chunk < top <= chunk + _MAX_WINDOW_BYTES:
            return 0, b""
        return chunk, self._mem.read(chunk, top - chunk)

    def _host_tid(self, pid: int, native_id: int, live: Set[int]) -> int:
        """The thread id /proc lists for a thread state's native id.

        A process in another PID namespace (a container, seen from the host) records the id
        of its own namespace: /proc/PID/task/TID/status maps it (``NSpid:``, innermost last).
        """
        if self._ns_map is None:
            self._ns_map = namespace_tids(self._procfs, pid)
        if self._ns_map:
            live = set(self._ns_map)
        if native_id not in live:  # a thread started since /proc was listed?
            self._ns_map = namespace_tids(self._procfs, pid)
            live = set(self._ns_map) if self._ns_map else set(self._procfs.tids(pid))
            if native_id not in live:
                raise RemoteReadError(f"thread state names thread {native_id}, not in /proc")
        return self._ns_map[native_id] if self._ns_map else native_id

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

    def _frames(self, frame: int, window: Tuple[int, bytes]) -> Tuple[List[Frame], Optional[int]]:
        """Frames innermost first, and the ``Thread`` object of an outermost ``_bootstrap``.

        A frame inside the thread's stack window is read from it as 8-byte words in place
        (a memoryview, no copy); one elsewhere (a generator's) is read on its own.
        """
        lay = self._lay
        base, stack = window
        in_place = memoryview(stack)[: len(stack) // 8 * 8].cast("Q")
        end = base + len(stack) - lay.frame_size
        unpack = struct.Struct(f"<{lay.frame_size // 8}Q").unpack
        i_code, i_prev, i_instr = lay.frame_code // 8, lay.frame_previous // 8, lay.frame_instr // 8
        i_self = lay.frame_localsplus // 8
        owner_at = lay.frame_owner if lay.version >= (3, 12) else -1
        located = self._located
        frames: List[Frame] = []
        seen: Set[int] = set()
        outermost_self = 0
        entered = False  # a frame of the chain lay in the thread's data stack
        while frame:
            if frame in seen or len(seen) >= _MAX_DEPTH:
                raise FrameChainCorrupt("frame chain cyclic/corrupt (loops or never ends)")
            if len(frames) >= MAX_FRAMES:  # budget: innermost frames kept, then a marker
                frames.append(frames_cut_marker())
                return frames, None
            seen.add(frame)
            entered = entered or base <= frame < base + len(stack)
            if base <= frame <= end and not (frame - base) & 7:
                at = frame - base
                w = at >> 3
                code_addr, previous = in_place[w + i_code], in_place[w + i_prev]
                instr, self_addr = in_place[w + i_instr], in_place[w + i_self]
                owner = stack[at + owner_at] if owner_at >= 0 else 0
            else:  # a generator's or coroutine's frame, or an older chunk
                raw = self._mem.read(frame, lay.frame_size)
                fields = unpack(raw)
                code_addr, previous = fields[i_code], fields[i_prev]
                instr, self_addr = fields[i_instr], fields[i_self]
                owner = raw[owner_at] if owner_at >= 0 else 0
            if owner == FRAME_OWNED_BY_CSTACK:  # a 3.12+ shim frame: no Python code
                frame = previous
                continue
            found = located.get((code_addr, instr))
            if found is None:
                code = self._code(code_addr)
                line = line_of(code.linetable, code.first_line, (instr - code.code_start) // 2)
                found = Frame(name=code.qualname, filename=code.filename, line=line or 0)
                located[(code_addr, instr)] = found
            frames.append(found)
            outermost_self = self_addr
            frame = previous
        if len(stack) > _CHUNK_EMPTY_BYTES and not entered:
            # Frames live in the data stack, yet the chain never reached them: its head was
            # read mid-call (3.11's new C frame before its ``current_frame`` is set; a
            # generator's frame just suspended, its back link cleared) - an empty or cut stack
            # that reads like a real one. Torn: read again.
            raise RemoteReadError("frame chain misses the thread's live frames (torn read)")
        if frames and frames[-1].name == "Thread._bootstrap" and outermost_self:
            return frames, outermost_self
        return frames, None

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
        try:
            linetable = self._objects.bytes_(ptrs[lay.code_linetable])
        except RemoteReadError:
            linetable = b""  # over the budget (or torn): the line is then unknown (0)
        code = _Code(
            qualname=self._objects.string(ptrs[lay.code_qualname]),
            filename=self._objects.string(ptrs[lay.code_filename]),
            first_line=int(struct.unpack_from("<i", raw, lay.code_firstlineno)[0]),
            linetable=linetable,
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


def read_stacks(procfs: ProcFS, pid: int, activity: bool = True) -> Optional[List[PyThreadDump]]:
    """All Python threads of ``pid``, or None when this reader does not handle its Python.

    ``active`` is py-spy's: the thread is on a CPU (state R) - read per thread unless
    ``activity`` is False (then False: the caller has the states from its own /proc read).

    Raises ``RemoteReadError`` when it handles it but the read failed or was inconsistent.
    """
    with RemoteMemory(procfs, pid) as memory:
        runtime = locate_runtime(procfs, pid, memory)
        layout = layout_for(runtime.version) if runtime is not None else None
        if runtime is None or layout is None:
            return None
        live = set(procfs.tids(pid))
        dumps = StackReader(memory, runtime, layout, procfs).threads(pid, live)
    if not activity:
        return dumps
    return [msgspec.structs.replace(d, active=_running(procfs, pid, d.os_thread_id)) for d in dumps]


def _running(procfs: ProcFS, pid: int, tid: Optional[int]) -> bool:
    try:
        return parse_thread_stat(procfs.read_task_text(pid, tid or 0, "stat"))[1] == "R"
    except (OSError, ValueError, IndexError):
        return False
