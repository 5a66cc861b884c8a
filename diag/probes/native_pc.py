"""Program counters of running threads, without stopping them.

``/proc/PID/task/TID/syscall`` gives a thread's PC and SP only when it is not runnable: the
kernel's ``task_current_syscall`` answers ``running`` for any task in TASK_RUNNING, preempted
or not (measured here: 40 of 40 reads of an MPI rank polling for a message, and every read of
a ``sched_yield`` loop sharing one core with a CPU hog); ``-1 SP PC`` is a stopped or traced
thread. ``stat``'s ``kstkeip`` is 0 on current kernels. The kernel's own sampler does see it:
a ``perf_event_open`` software clock on the thread, counting only user time, for a few
milliseconds, records the PC and a copy of the top of its user stack at each tick into a ring
buffer we map - the target is never stopped or signalled, as with ``perf record``. Where perf
is refused (no CAP_PERFMON/root, a seccomp profile that blocks it) this gives nothing: a
spinning thread then has no location. Bounded: ``MAX_THREADS`` threads a call,
``MAX_WINDOWS`` windows of ``WINDOW_S``, a ring of ``RING_PAGES`` pages, ``STACK_BYTES`` of
stack per sample.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import platform
import struct
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

MAX_THREADS = 8  # threads sampled a process a sample: its first running ones, main first
WINDOW_S = 0.008
# A thread that got no tick in a window (a busy host: it waited for a CPU) gets another, up to
# this many windows in all; threads that ran are not sampled again.
MAX_WINDOWS = 3
PERIOD_NS = 400_000  # one tick per 0.4 ms of the thread's own CPU time: ~20 in the window
RING_PAGES = 8  # data pages (a power of two), plus one page of metadata
STACK_BYTES = 512  # the top of the user stack copied with each tick: its nearest callers

_PERF_OPEN = {"x86_64": 298, "aarch64": 241}
# The stack pointer's bit in sample_regs_user (arch/*/include/uapi/asm/perf_regs.h).
_SP_BIT = {"x86_64": 7, "aarch64": 31}
_TYPE_SOFTWARE = 1
_SW_TASK_CLOCK = 1
_SAMPLE_IP, _SAMPLE_TID, _SAMPLE_REGS_USER, _SAMPLE_STACK_USER = 1, 2, 1 << 12, 1 << 13
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1, 1 << 5, 1 << 6
_IOC_ENABLE, _IOC_DISABLE = 0x2400, 0x2401
_RECORD_SAMPLE = 9
_FD_CLOEXEC = 8
_PAGE = mmap.PAGESIZE


class PcSample(NamedTuple):
    """One PC of a thread, with the top of its stack (``stack``: raw bytes from SP up)."""

    pc: int
    stack: bytes = b""


def _attr(machine: str) -> ctypes.Array[ctypes.c_char]:
    raw = bytearray(128)
    sample_type = _SAMPLE_IP | _SAMPLE_TID | _SAMPLE_REGS_USER | _SAMPLE_STACK_USER
    flags = _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV
    struct.pack_into("<IIQQQQQ", raw, 0, _TYPE_SOFTWARE, 128, _SW_TASK_CLOCK, PERIOD_NS,
                     sample_type, 0, flags)  # fmt: skip
    struct.pack_into("<QI", raw, 80, 1 << _SP_BIT[machine], STACK_BYTES)
    return (ctypes.c_char * 128).from_buffer(raw)


class _Open(NamedTuple):
    tid: int
    fd: int
    ring: mmap.mmap


# perf_event_open's answers that mean "not here, not for any thread": no right to it
# (perf_event_paranoid, no CAP_PERFMON), a seccomp profile, a kernel without perf events.
_REFUSED = {errno.EPERM: "EPERM", errno.EACCES: "EACCES", errno.ENOSYS: "ENOSYS"}


def sample_pcs(
    tids: Sequence[int], machine: str = "", refused: Optional[List[str]] = None
) -> Dict[int, List[PcSample]]:
    """{tid: PCs seen in one short window}; a thread perf refuses, or that did not run in the
    window, has no entry. Never raises for a thread; raises nothing at all. ``refused``: gets
    why, when perf is refused for every thread (the capture then has no native locations)."""
    machine = machine or platform.machine()
    nr = _PERF_OPEN.get(machine)
    if nr is None or not tids:
        if nr is None and refused is not None:
            refused.append(f"no perf_event_open number known for {machine}")
        return {}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return {}
    attr = _attr(machine)
    opened: List[_Open] = []
    errors: List[int] = []
    try:
        for tid in list(tids)[:MAX_THREADS]:
            fd = libc.syscall(nr, attr, tid, -1, -1, _FD_CLOEXEC)
            if fd < 0:
                errors.append(ctypes.get_errno())
                continue
            try:
                ring = mmap.mmap(fd, (1 + RING_PAGES) * _PAGE, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
            except OSError:
                os.close(fd)
                continue
            opened.append(_Open(tid, fd, ring))
        if not opened:
            if refused is not None and errors and all(e in _REFUSED for e in errors):
                refused.append(f"perf_event_open: {_REFUSED[errors[0]]}")
            return {}
        out: Dict[int, List[PcSample]] = {}
        waiting = list(opened)
        for _ in range(MAX_WINDOWS):
            for o in waiting:
                fcntl.ioctl(o.fd, _IOC_ENABLE, 0)
            time.sleep(WINDOW_S)
            for o in waiting:
                fcntl.ioctl(o.fd, _IOC_DISABLE, 0)
            for o in waiting:
                found = _records(o.ring)
                if found:
                    out[o.tid] = found
            waiting = [o for o in waiting if o.tid not in out]
            if not waiting:
                break
        return out
    except OSError:
        return {}
    finally:
        for o in opened:
            o.ring.close()
            os.close(o.fd)


def _records(ring: mmap.mmap) -> List[PcSample]:
    """The sample records of a ring nobody consumed (the kernel stops writing when it is full,
    so no record wraps past its end)."""
    (head,) = struct.unpack_from("<Q", ring, 1024)
    data_offset, data_size = struct.unpack_from("<QQ", ring, 1040)
    if data_offset == 0:
        data_offset, data_size = _PAGE, RING_PAGES * _PAGE
    data = ring[data_offset : data_offset + min(head, data_size)]
    out: List[PcSample] = []
    pos = 0
    while pos + 8 <= len(data):
        rtype, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8 or pos + size > len(data):
            break
        if rtype == _RECORD_SAMPLE:
            found = _sample(data[pos + 8 : pos + size])
            if found is not None:
                out.append(found)
        pos += size
    return out


def _sample(body: bytes) -> Optional[PcSample]:
    """ip, pid/tid, regs (abi, then SP when abi != 0), stack (size, bytes, dyn_size)."""
    if len(body) < 24:
        return None
    ip, _pid, _tid, abi = struct.unpack_from("<QIIQ", body, 0)
    at = 24 + (8 if abi else 0)
    if at + 8 > len(body):
        return PcSample(ip)
    (size,) = struct.unpack_from("<Q", body, at)
    stack = body[at + 8 : at + 8 + size]
    dyn_at = at + 8 + size
    if size and dyn_at + 8 <= len(body):
        (dyn,) = struct.unpack_from("<Q", body, dyn_at)
        stack = stack[:dyn]
    return PcSample(ip, bytes(stack))


def syscall_pc(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """(PC, SP) of a /proc/PID/task/TID/syscall text of a thread off its CPU; None for
    ``running`` or text that is not the file's."""
    parts = (text or "").split()
    if len(parts) < 3 or parts[0] == "running":
        return None
    try:
        return int(parts[-1], 16), int(parts[-2], 16)
    except ValueError:
        return None


def read_code(pid: int, addr: int, size: int, proc_root: str = "/proc") -> bytes:
    """``size`` bytes (at most 4 KiB) of ``pid``'s memory at ``addr``, or b""."""
    if addr <= 0:
        return b""
    try:
        fd = os.open(f"{proc_root}/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.pread(fd, min(size, 4096), addr)
    except (OSError, OverflowError):
        return b""
    finally:
        os.close(fd)


def read_stack(pid: int, sp: int, proc_root: str = "/proc") -> bytes:
    """``STACK_BYTES`` of ``pid``'s memory from ``sp`` up (its nearest callers), or b""."""
    return read_code(pid, sp, STACK_BYTES, proc_root)


def follows_call(code: bytes, machine: str) -> bool:
    """Whether the 8 bytes before a return address end with a call instruction. x86_64: a
    ``call rel32`` (E8 + 4 bytes) or an indirect ``call`` (FF /2, 2 to 7 bytes with its
    ModRM, SIB and displacement); aarch64: ``BL`` or ``BLR`` in the last 4 bytes."""
    if len(code) != 8:
        return False
    if machine == "aarch64":
        insn = int.from_bytes(code[4:], "little")
        return (insn & 0xFC000000) == 0x94000000 or (insn & 0xFFFFFC1F) == 0xD63F0000
    if code[3] == 0xE8:
        return True
    return any(code[8 - k] == 0xFF and (code[9 - k] & 0x38) == 0x10 for k in range(2, 8))
