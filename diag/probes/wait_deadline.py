"""When a blocked thread wakes by itself: the timeout its blocking call was given (issue #33).

A rank asleep in a back-off while its peers wait in a collective resumes by itself, a rank
asleep in ``while True: time.sleep(3600)`` does not in any useful time; stacks cannot tell
them apart, the call's own timeout can. ``/proc/P/task/T/syscall`` gives the call's
arguments; where the timeout is a pointer, the 16-byte ``timespec`` (``timeval`` for
``select``) it points to is read from ``/proc/P/mem`` - one bounded ``pread``, only for a
thread blocked in one of these calls, failing alone (no right, a bad pointer, a value no
timeout can be: None).

Where each call keeps its timeout, and what it means:

- ``futex``: argument 3. ``FUTEX_WAIT`` takes a relative time; ``FUTEX_WAIT_BITSET``,
  ``FUTEX_WAIT_REQUEUE_PI`` and ``FUTEX_LOCK_PI2`` an absolute one on CLOCK_MONOTONIC, or
  CLOCK_REALTIME with the op's 0x100 flag (``FUTEX_LOCK_PI``: always REALTIME).
- ``poll`` (argument 2) and ``epoll_wait``/``epoll_pwait`` (argument 3): milliseconds in an
  int, negative for ever. ``ppoll`` (2), ``pselect6`` (4), ``epoll_pwait2`` (3): a relative
  ``timespec``; ``select`` (4): a relative ``timeval``.
- ``nanosleep``: a relative ``timespec`` in argument 0; ``clock_nanosleep(clock, flags, req)``:
  absolute on ``clock`` when ``flags`` has TIMER_ABSTIME (what CPython's ``time.sleep`` does).

A relative timeout read mid-wait is the budget the call was given when it last went to
sleep; with the thread's time off the CPU since (``off_cpu_s``) it gives the time left. A call
interrupted by a ptrace stop (py-spy's dump) comes back as ``restart_syscall`` with its
registers kept: read as a futex where the wait channel says so; for a relative one the age
restarts too, so the time left is then an upper bound. Absolute deadlines are compared with
diag's own clock (a target in another time namespace would be off by the namespace's offset).
"""

from __future__ import annotations

import os
import struct
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

# Where each call keeps its timeout: (argument index, encoding). Encodings: "ms" an int of
# milliseconds (negative: none), "ts" a relative timespec, "tv" a relative timeval.
_ARG: Dict[str, Tuple[int, str]] = {
    "poll": (2, "ms"),
    "epoll_wait": (3, "ms"),
    "epoll_pwait": (3, "ms"),
    "ppoll": (2, "ts"),
    "pselect6": (4, "ts"),
    "epoll_pwait2": (3, "ts"),
    "select": (4, "tv"),
    "nanosleep": (0, "ts"),
}
# The calls this module reads; ``restart_syscall`` is read as a futex when its wchan says so.
CALLS = frozenset(_ARG) | {"futex", "clock_nanosleep", "restart_syscall"}

_FUTEX_WAIT = 0
_FUTEX_LOCK_PI = 6
_FUTEX_WAIT_BITSET = 9
_FUTEX_WAIT_REQUEUE_PI = 11
_FUTEX_LOCK_PI2 = 13
_FUTEX_CLOCK_REALTIME = 0x100
_TIMER_ABSTIME = 1
# clock_nanosleep's clock ids -> Python's (CLOCK_REALTIME 0, MONOTONIC 1, BOOTTIME 7, TAI 11).
_CLOCKS = {0: time.CLOCK_REALTIME, 1: time.CLOCK_MONOTONIC, 7: 7, 11: 11}
_TIMESPEC_BYTES = 16  # x86_64 and aarch64: two 64-bit fields (timeval alike)
# No timeout is longer than this (a relative value past it is garbage or "for ever").
MAX_TIMEOUT_S = 10 * 365 * 86400.0


class Deadline(NamedTuple):
    """``timeout_s``: the budget the call was given when it last went to sleep; ``wakes_in_s``:
    how long until it wakes by itself at the latest (0: overdue), None where unknown."""

    timeout_s: Optional[float]
    wakes_in_s: Optional[float]


NONE = Deadline(None, None)


class MemReader:
    """``pread`` of a few bytes of one process's memory, the file opened on first use and
    kept for its threads; every failure is None (no right, the process gone, a bad address)."""

    def __init__(self, mem_path: str) -> None:
        self._path = mem_path
        self._fd: Optional[int] = None
        self._failed = False

    def read(self, addr: int, size: int) -> Optional[bytes]:
        if addr <= 0 or size <= 0 or size > 64 or self._failed:
            return None
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._failed = True
                return None
        try:
            data = os.pread(self._fd, size, addr)
        except (OSError, OverflowError):
            return None
        return data if len(data) == size else None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _seconds(data: Optional[bytes], sub_per_s: int) -> Optional[float]:
    """A timespec (``sub_per_s`` 1e9) or timeval (1e6) as seconds; None for no valid one."""
    if data is None:
        return None
    sec, sub = (int(v) for v in struct.unpack("<qq", data))
    if sec < 0 or not 0 <= sub < sub_per_s:
        return None
    return sec + sub / sub_per_s


def _relative(value_s: Optional[float], off_cpu_s: Optional[float]) -> Deadline:
    if value_s is None or value_s > MAX_TIMEOUT_S:
        return NONE
    left = None if off_cpu_s is None else max(0.0, value_s - off_cpu_s)
    return Deadline(round(value_s, 3), None if left is None else round(left, 3))


def _absolute(deadline_s: Optional[float], clock: int, off_cpu_s: Optional[float]) -> Deadline:
    if deadline_s is None:
        return NONE
    try:
        now = time.clock_gettime(clock)
    except OSError:
        return NONE
    left = max(0.0, deadline_s - now)
    if left > MAX_TIMEOUT_S:
        return NONE
    budget = None if off_cpu_s is None else round(left + off_cpu_s, 3)
    return Deadline(budget, round(left, 3))


def _futex(args: List[int], mem: MemReader, off_cpu_s: Optional[float]) -> Deadline:
    op = args[1]
    cmd = op & 0x7F
    ptr = args[3]
    if ptr == 0 or cmd not in (
        _FUTEX_WAIT,
        _FUTEX_LOCK_PI,
        _FUTEX_WAIT_BITSET,
        _FUTEX_WAIT_REQUEUE_PI,
        _FUTEX_LOCK_PI2,
    ):
        return NONE
    value = _seconds(mem.read(ptr, _TIMESPEC_BYTES), 1_000_000_000)
    if cmd == _FUTEX_WAIT:
        return _relative(value, off_cpu_s)
    realtime = cmd == _FUTEX_LOCK_PI or bool(op & _FUTEX_CLOCK_REALTIME)
    clock = time.CLOCK_REALTIME if realtime else time.CLOCK_MONOTONIC
    return _absolute(value, clock, off_cpu_s)


def deadline(
    call: str,
    args_hex: List[str],
    mem: MemReader,
    off_cpu_s: Optional[float],
    wchan: Optional[str] = None,
) -> Deadline:
    """The timeout of a thread blocked in ``call`` with these (hex) arguments."""
    try:
        args = [int(a, 16) for a in args_hex[:6]]
    except ValueError:
        return NONE
    if len(args) < 6:
        return NONE
    if call == "restart_syscall":  # registers kept: a futex's args where the wchan says so
        return _futex(args, mem, None) if (wchan or "").startswith("futex_") else NONE
    if call == "futex":
        return _futex(args, mem, off_cpu_s)
    if call == "clock_nanosleep":
        clock = _CLOCKS.get(args[0])
        value = _seconds(mem.read(args[2], _TIMESPEC_BYTES), 1_000_000_000)
        if not args[1] & _TIMER_ABSTIME:
            return _relative(value, off_cpu_s)
        return _absolute(value, clock, off_cpu_s) if clock is not None else NONE
    where = _ARG.get(call)
    if where is None:
        return NONE
    index, encoding = where
    if encoding == "ms":
        low = args[index] & 0xFFFFFFFF  # an int argument: the register's low 32 bits, signed
        return NONE if low >= 0x80000000 else _relative(low / 1000.0, off_cpu_s)
    data = mem.read(args[index], _TIMESPEC_BYTES) if args[index] else None
    return _relative(_seconds(data, 1_000_000 if encoding == "tv" else 1_000_000_000), off_cpu_s)
