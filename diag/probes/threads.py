"""Per-thread kernel state from /proc/P/task/T: what every OS thread is doing right now.

Python stacks only cover Python threads; NCCL, gloo and CUDA threads are native and only the
kernel knows what they wait on. Three files answer that cheaply and without pausing the target:

- ``stat``: name, state, CPU ticks. The name is in parentheses and may itself contain ``)``
  or spaces, so the fields are split after the LAST ``)``.
- ``syscall``: ``running`` | ``-1 SP PC`` (not in a syscall) | ``NR a0 .. a5 SP PC``. For a
  futex wait, a0 is the futex address: threads waiting on the same lock share it, which is how
  a lock cycle or a "everyone waits on one thing" shows up without any stack.
- ``wchan`` and ``status`` (context switches: a thread whose voluntary switches do not move
  sleeps; one whose ticks rise is spinning).

Parsers are pure functions of the file text; ``read_threads`` is the thin I/O around them.
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Tuple

from diag.model import ThreadSample
from diag.probes.loop_wakers import epoll_fd, parse_sig_caught, read_watched
from diag.probes.procfs import ProcFS
from diag.probes.sched_clock import SchedClock
from diag.probes.thread_ages import off_cpu_s, with_lock_ages
from diag.probes.wait_deadline import CALLS as _DEADLINE_CALLS
from diag.probes.wait_deadline import NONE as _NO_DEADLINE
from diag.probes.wait_deadline import MemReader, deadline

# The syscalls that matter for "what is this thread waiting on", by architecture. Everything
# else is recorded as nr_N (the number stays in syscall_nr).
SYSCALL_NAMES: Dict[str, Dict[int, str]] = {
    "x86_64": {
        0: "read",
        1: "write",
        7: "poll",
        23: "select",
        34: "pause",
        35: "nanosleep",
        42: "connect",
        43: "accept",
        44: "sendto",
        45: "recvfrom",
        46: "sendmsg",
        47: "recvmsg",
        61: "wait4",
        72: "fcntl",
        73: "flock",
        202: "futex",
        219: "restart_syscall",
        228: "clock_gettime",
        230: "clock_nanosleep",
        232: "epoll_wait",
        247: "waitid",
        270: "pselect6",
        271: "ppoll",
        281: "epoll_pwait",
        288: "accept4",
        441: "epoll_pwait2",
        449: "futex_waitv",
    },
    "aarch64": {
        22: "epoll_pwait",
        25: "fcntl",
        32: "flock",
        63: "read",
        64: "write",
        72: "pselect6",
        73: "ppoll",
        98: "futex",
        101: "nanosleep",
        115: "clock_nanosleep",
        128: "restart_syscall",
        202: "accept",
        203: "connect",
        206: "sendto",
        207: "recvfrom",
        211: "sendmsg",
        212: "recvmsg",
        242: "accept4",
        260: "wait4",
        441: "epoll_pwait2",
        449: "futex_waitv",
    },
}

FUTEX_CMD_MASK = 0x7F  # op & 0x7f = FUTEX_WAIT(0), WAKE(1), WAIT_BITSET(9)...; 0x80 = private


class TaskStat(NamedTuple):
    """The /proc/P[/task/T]/stat fields diag uses (field numbers as in proc(5))."""

    name: str
    state: str
    ppid: int
    utime_ticks: int  # field 14
    stime_ticks: int  # field 15
    children_ticks: int  # fields 16 + 17: CPU of children it waited for (compilers, sh -c)
    num_threads: int  # field 20
    start_ticks: int  # field 22, since boot
    vsize_bytes: int  # field 23
    rss_pages: int  # field 24
    exit_code: Optional[int]  # field 52 (waitpid status), Linux >= 3.5
    nice: int = 0  # field 19: -20 (first served) to 19 (last)
    policy: int = 0  # field 41: SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6


class SyscallInfo(NamedTuple):
    syscall: Optional[str]  # "running" | "none" | a name | "nr_N"; None if unreadable
    nr: Optional[int] = None
    futex_addr: Optional[str] = None
    futex_op: Optional[int] = None
    timed: Optional[bool] = None  # the blocking call ends by itself (a timeout); None: unknown
    # read/write/recv*/send*/connect/accept: the file descriptor (0: a prompt waiting on stdin)
    fd: Optional[int] = None


# Where each blocking syscall keeps its timeout: ("ms", i) an int of milliseconds in argument
# i (-1: forever), ("ptr", i) a pointer in argument i (NULL: forever). Calls with no timeout at
# all wait until someone else acts; sleeps always end by themselves.
_TIMEOUT_ARG: Dict[str, Tuple[str, int]] = {
    "epoll_wait": ("ms", 3),
    "epoll_pwait": ("ms", 3),
    "poll": ("ms", 2),
    "epoll_pwait2": ("ptr", 3),
    "ppoll": ("ptr", 2),
    "select": ("ptr", 4),
    "pselect6": ("ptr", 4),
    "futex": ("ptr", 3),
}
_UNTIMED = frozenset(
    {"read", "recvfrom", "recvmsg", "accept", "accept4", "wait4", "waitid", "flock", "fcntl"}
)
_TIMED = frozenset({"nanosleep", "clock_nanosleep"})
# Argument 0 is the fd (x86_64 and aarch64 have no recv/send of their own: libc's go through
# recvfrom/sendto).
_FD_CALLS = frozenset(
    {"read", "write", "recvfrom", "recvmsg", "sendto", "sendmsg", "connect", "accept", "accept4"}
    | {"flock", "fcntl"}
)
_UNREAD = SyscallInfo(None)


def wait_timed(name: str, args: List[str]) -> Optional[bool]:
    """Whether a thread blocked in ``name`` (with these hex arguments) will wake by itself: the
    difference between an event loop with a timer pending and one nothing outside can wake."""
    if name in _TIMED:
        return True
    if name in _UNTIMED:
        return False
    where = _TIMEOUT_ARG.get(name)
    if where is None or len(args) <= where[1]:
        return None
    value = int(args[where[1]], 16)
    if where[0] == "ptr":
        return value != 0
    low = value & 0xFFFFFFFF  # an int argument: the register's low 32 bits, signed
    return low < 0x80000000


def parse_name_state(text: str) -> Tuple[str, str]:
    """(comm, state letter) of a stat line - all a holder outside the job needs; ("", "?")
    for text that is no stat line."""
    close_at = text.rfind(")")
    if close_at < 0:
        return "", "?"
    rest = text[close_at + 1 :].split(maxsplit=1)
    return text[text.find("(") + 1 : close_at][:64], rest[0] if rest else "?"


def parse_task_stat(text: str) -> TaskStat:
    """Parse a stat line; the name is between the first ``(`` and the LAST ``)``."""
    open_at = text.index("(")
    close_at = text.rindex(")")
    name = text[open_at + 1 : close_at]
    rest = text[close_at + 1 :].split()
    # rest[0] is field 3 (state): field N is rest[N - 3].

    def field(n: int) -> int:
        return int(rest[n - 3]) if len(rest) > n - 3 else 0

    exit_code = int(rest[52 - 3]) if len(rest) > 52 - 3 else None
    return TaskStat(
        name=name,
        state=rest[0],
        ppid=field(4),
        utime_ticks=field(14),
        stime_ticks=field(15),
        children_ticks=field(16) + field(17),
        num_threads=field(20),
        start_ticks=field(22),
        vsize_bytes=field(23),
        rss_pages=field(24),
        exit_code=exit_code,
        nice=field(19),
        policy=field(41),
    )


def parse_thread_stat(text: str) -> Tuple[str, str, int, int]:
    """(name, state, utime, stime) of a stat line: what a thread record needs, without
    splitting the ~40 fields after them (the hot path: 512 threads per sample)."""
    close_at = text.rindex(")")
    rest = text[close_at + 2 :].split(" ", 13)  # rest[0] is field 3: field N is rest[N - 3]
    return text[text.index("(") + 1 : close_at], rest[0], int(rest[11]), int(rest[12])


def parse_majflt(text: str) -> Optional[int]:
    """Field 12 of a stat line: the major faults so far (pages read from disk or swap)."""
    rest = text[text.rindex(")") + 2 :].split(" ", 10)  # rest[0] is field 3
    return int(rest[9]) if len(rest) > 9 and rest[9].isdigit() else None


def parse_parent(text: str) -> Tuple[int, int]:
    """(ppid, start ticks) of a stat line: what the process tree needs of every process on
    the host (hundreds on a busy one), without building a whole ``TaskStat``."""
    rest = text[text.rindex(")") + 2 :].split(" ", 20)  # rest[0] is field 3
    return int(rest[1]), int(rest[19])


def decode_wait_status(status: Optional[int]) -> Optional[int]:
    """waitpid status (stat field 52) -> exit code, or -SIGNAL when killed (Popen's convention)."""
    if status is None:
        return None
    if status & 0x7F:
        return -(status & 0x7F)
    return (status >> 8) & 0xFF


def parse_status(text: str) -> Dict[str, str]:
    """``Key:\\tvalue`` lines of /proc/P/status into a dict (values stripped)."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _status_count(text: str, key: str) -> Optional[int]:
    at = text.find(key)
    if at < 0:
        return None
    start = at + len(key)
    end = text.find("\n", start)
    value = text[start : end if end >= 0 else len(text)].strip()
    return int(value) if value.isdigit() else None


def parse_ctxt_switches(text: str) -> Tuple[Optional[int], Optional[int]]:
    """(voluntary, nonvoluntary) context switches of a status file, found directly: splitting
    all ~55 lines into a dict was the largest cost of reading a thread (measured in bench/)."""
    return (
        _status_count(text, "\nvoluntary_ctxt_switches:"),
        _status_count(text, "\nnonvoluntary_ctxt_switches:"),
    )


def parse_syscall(text: str, machine: str = "x86_64") -> SyscallInfo:
    """Parse /proc/P/task/T/syscall in its three forms; unknown text gives syscall None."""
    parts = text.split()
    if not parts:
        return SyscallInfo(None)
    if parts[0] == "running":
        return SyscallInfo("running")
    try:
        nr = int(parts[0])
    except ValueError:
        return SyscallInfo(None)
    if nr == -1:
        return SyscallInfo("none", nr=-1)
    name = SYSCALL_NAMES.get(machine, {}).get(nr, f"nr_{nr}")
    try:
        timed = wait_timed(name, parts[1:7])
    except ValueError:
        timed = None
    if name == "futex" and len(parts) >= 3:
        addr = int(parts[1], 16)
        op = int(parts[2], 16)
        return SyscallInfo(name, nr=nr, futex_addr=hex(addr), futex_op=op, timed=timed)
    fd = int(parts[1], 16) if name in _FD_CALLS and len(parts) >= 2 else None
    return SyscallInfo(name, nr=nr, timed=timed, fd=fd)


def parse_wchan(text: str) -> Optional[str]:
    """``0`` (running, or no permission) and empty text mean "no wait channel"."""
    value = text.strip()
    return None if value in ("", "0") else value


_THREAD_FILES = ("stat", "wchan", "syscall", "status")
# The main thread's (tid == pid) also: its run-queue delay. The main thread is the one a
# verdict names (it waits, it diverged, it is throttled); two more reads for every thread
# were a third of the first sample at 8 ranks x 300 threads (bench snapshot).
_MAIN_FILES = (*_THREAD_FILES, "schedstat")


def parse_run_delay_ns(text: str) -> Optional[int]:
    """/proc/.../schedstat is ``run_ns wait_ns timeslices``: ``wait_ns`` is the time the thread
    spent runnable on a run queue waiting for a CPU (a throttled or starved thread's mark)."""
    parts = text.split()
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


_PF_KTHREAD = 0x00200000
# ``ThreadSample.syscall`` of a kernel thread (no mm, no exe): it runs no syscalls of its own.
KERNEL_THREAD = "kernel-thread"


def is_kernel_thread(stat: str) -> bool:
    """``PF_KTHREAD`` in the flags (field 9) of a /proc/P/stat line."""
    fields = stat.rpartition(")")[2].split()
    try:
        return bool(int(fields[6]) & _PF_KTHREAD)
    except (IndexError, ValueError):
        return False


def read_thread(
    procfs: ProcFS,
    pid: int,
    tid: int,
    machine: str,
    clock: Optional[SchedClock] = None,
    mem: Optional[MemReader] = None,
) -> Optional[ThreadSample]:
    """One thread's sample; None if it exited between listing and reading. A file other than
    stat that cannot be read (EACCES without ptrace-read rights) leaves its fields None.
    ``clock``: ``SchedClock``, to read how long a waiting thread has been off the CPU;
    ``mem``: the process's memory, to read a timed wait's timeout (``wait_deadline``)."""
    main = tid == pid
    texts = procfs.read_task_texts(pid, tid, _MAIN_FILES if main else _THREAD_FILES)
    stat, wchan_text, syscall_text, status = texts[:4]
    schedstat = texts[4] if main else None
    if stat is None:
        return None
    try:
        name, state, utime, stime = parse_thread_stat(stat)
    except (ValueError, IndexError):
        return None
    wchan = parse_wchan(wchan_text) if wchan_text is not None else None
    sys_info = parse_syscall(syscall_text, machine) if syscall_text is not None else _UNREAD
    if is_kernel_thread(stat):  # its syscall file reads "0 0x0 ...": read(0), not stdin
        sys_info = SyscallInfo(KERNEL_THREAD)
    vol, nonvol = parse_ctxt_switches(status) if status is not None else (None, None)
    # A call the kernel shows untimed (a futex with no timespec, poll with -1) has no
    # deadline to read; ``sys_info.timed`` None (restart_syscall, unknown) is read to find out.
    timed = (
        mem is not None
        and state != "R"
        and sys_info.syscall in _DEADLINE_CALLS
        and sys_info.timed is not False
    )
    # The wait's age: of the main thread (the one a verdict names), and of a thread in a
    # timed call (its deadline's age); one more read for every thread was too dear - every
    # untimed futex waiter's was 63 of a bench rank's 64 threads (``_with_lock_ages`` reads a
    # few of them).
    off_cpu = off_cpu_s(procfs, pid, tid, state, clock if main or timed else None, stat)
    due = _NO_DEADLINE
    if timed and mem is not None:
        due = deadline(
            sys_info.syscall or "", (syscall_text or "").split()[1:7], mem, off_cpu, wchan
        )
    watched = None
    epfd = epoll_fd(sys_info.syscall, syscall_text) if main else None
    if epfd is not None:
        watched = read_watched(procfs, pid, epfd)
    return ThreadSample(
        tid=tid,
        name=name,
        state=state,
        utime_ticks=utime,
        stime_ticks=stime,
        wchan=wchan,
        syscall=sys_info.syscall,
        syscall_nr=sys_info.nr,
        futex_addr=sys_info.futex_addr,
        futex_op=sys_info.futex_op,
        syscall_fd=sys_info.fd,
        wait_timed=sys_info.timed,
        voluntary_ctxt_switches=vol,
        nonvoluntary_ctxt_switches=nonvol,
        off_cpu_s=off_cpu,
        timeout_s=due.timeout_s,
        wakes_in_s=due.wakes_in_s,
        run_delay_ns=parse_run_delay_ns(schedstat) if schedstat is not None else None,
        majflt=parse_majflt(stat),
        watched_fds=watched[0] if watched is not None else None,
        watched_more=watched[1] if watched is not None else 0,
        signals_caught=parse_sig_caught(status) if main and status is not None else None,
    )


def read_threads(
    procfs: ProcFS, pid: int, machine: str, clock: Optional[SchedClock] = None
) -> Tuple[ThreadSample, ...]:
    """Every OS thread of ``pid`` (native ones included), in TID order. ``clock``: the
    reader's (its CPUs' offsets kept across processes), else one for this read."""
    out: List[ThreadSample] = []
    clock = clock if clock is not None else SchedClock(procfs)
    mem = MemReader(procfs.spath(pid, "mem"))
    try:
        for tid in procfs.tids(pid):
            sample = read_thread(procfs, pid, tid, machine, clock, mem)
            if sample is not None:
                out.append(sample)
    finally:
        mem.close()
    return tuple(with_lock_ages(procfs, pid, out, clock))


def namespace_tids(procfs: ProcFS, pid: int) -> Dict[int, int]:
    """{thread id in ``pid``'s own PID namespace: id in ours}; {} when they are the same.

    A process in a container records (and py-spy reports) the thread ids of its namespace;
    /proc here lists other ones. ``NSpid:`` in each task's status gives both (innermost last).
    """
    theirs = procfs.readlink(pid, "ns", "pid")
    ours = procfs.readlink(os.getpid(), "ns", "pid")
    if theirs is None or ours is None or theirs == ours:
        return {}
    out: Dict[int, int] = {}
    for tid in procfs.tids(pid):
        status = procfs.try_read_text(pid, "task", str(tid), "status") or ""
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                out[int(line.split()[-1])] = tid
                break
    return out
