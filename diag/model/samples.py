"""What one sample holds: threads, processes, logs, GPUs, the ends of waits, probe
failures (``diag.model``)."""

from __future__ import annotations

from typing import Dict, Literal, Optional, Tuple

from diag.model.base import Record
from diag.vocab import FsKind


class Frame(Record, frozen=True):
    """One Python frame as py-spy reports it (innermost first in a stack)."""

    name: str
    filename: str = ""
    line: int = 0
    module: Optional[str] = None


class Stack(Record, frozen=True):
    """A Python call stack, innermost frame first, shared by id between threads and samples."""

    frames: Tuple[Frame, ...] = ()


class IoCounters(Record, frozen=True):
    """/proc/P/io: rchar/wchar count every read()/write() (page cache too); *_bytes hit storage."""

    rchar: int = 0
    wchar: int = 0
    syscr: int = 0
    syscw: int = 0
    read_bytes: int = 0
    write_bytes: int = 0


class ServedConn(Record, frozen=True):
    """A client connection to one of a process's listening ports, from the kernel's tcp_info.

    ``/proc/P/io`` never sees ``send``/``recv``: a server answering requests over sockets shows
    no wchar. These counters do, and their ages say whether a request waits for its answer
    (data arrived after the last byte was sent back, or nothing was ever sent back).
    """

    port: int
    remote: str = ""
    inode: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    recv_age_ms: int = 0
    send_age_ms: int = 0
    rqueue_bytes: int = 0  # received and not yet read by the server
    internal: bool = False  # the client is a process of the job itself (an RPC peer)

    @property
    def pending(self) -> bool:
        """A request arrived and no answer has gone out since."""
        if self.bytes_in <= 0:
            return False
        return self.bytes_out == 0 or self.rqueue_bytes > 0 or self.recv_age_ms < self.send_age_ms


class ClosedConns(Record, frozen=True):
    """Connections a listening port's server closed within the last 60 s (TIME_WAIT on the
    port: the server closed first, after its answer - a client giving up on a stuck server
    leaves its TIME_WAIT on its own side). A request that came and went between two samples
    shows nowhere else: no open connection, no log line, its thread gone.
    ``youngest_age_ms``: the last close, before this sample; ``oldest_age_ms``: the first
    still remembered."""

    port: int
    count: int = 0
    youngest_age_ms: int = 0
    oldest_age_ms: int = 0


class OpenFile(Record, frozen=True):
    """A big regular file a process holds open or has mapped (weights, checkpoints, downloads).

    ``read``/``write``: an open fd, ``pos_bytes`` its offset (/proc/P/fdinfo/N ``pos:``), the
    progress of a read() loader or a download. ``mmap``: a file-backed mapping, ``size_bytes``
    the mapping's length and ``resident_bytes`` its Rss (/proc/P/smaps), the progress of an mmap
    loader (safetensors). ``path`` is capped in length."""

    path: str
    size_bytes: int = 0
    pos_bytes: Optional[int] = None
    device: Optional[str] = None  # "MAJ:MIN" of the filesystem it lives on (st_dev)
    resident_bytes: Optional[int] = None
    kind: Literal["read", "write", "mmap"] = "read"
    fd: Optional[int] = None


class TcpDelivery(Record, frozen=True):
    """Whether a TCP connection's other end acknowledges what it is sent (tcp_info), recorded
    only where something is in flight or probed: a dead host or a cut link acknowledges
    nothing - data stays unacknowledged and the retransmission timeout backs off, doubling -
    where a quiet link has nothing in flight and a peer that does not read (stopped, busy)
    still has its kernel acknowledge (then a full window is probed, and answered)."""

    unacked_segs: int = 0  # tcpi_unacked: segments sent, not yet acknowledged
    retrans_total: int = 0  # tcpi_total_retrans: segments retransmitted over its life
    rto_backoffs: int = 0  # tcpi_backoff: retransmission timeouts in a row
    probes_out: int = 0  # tcpi_probes: window (or keepalive) probes unanswered in a row
    ack_age_ms: int = 0  # tcpi_last_ack_recv: since the other end last acknowledged


FdKind = Literal["pipe", "fifo", "unix", "tcp", "udp"]
FdMode = Literal["r", "w", "rw", "?"]


class FdEnd(Record, frozen=True):
    """One fd of a process through which another process can end a wait: a pipe or fifo end,
    a unix or TCP socket (``diag.probes.fd_ends``). A wait on a pipe is ended by whoever holds
    its other end, found by matching ``inode`` across processes; a unix socket's other end is
    ``peer_inode`` (sock_diag ``UNIX_DIAG_PEER``); a TCP socket's is its 4-tuple, and its
    ``peer_inode`` the other end's socket on this host (the accepted one, or the listener).

    ``mode``: pipes and fifos, from /proc/P/fdinfo/N ``flags`` (O_RDONLY/O_WRONLY/O_RDWR).
    ``path``: a fifo's or a named unix socket's path, capped in length."""

    fd: int
    kind: FdKind
    inode: int = 0
    mode: FdMode = "?"
    peer_inode: Optional[int] = None
    local: str = ""  # tcp/udp: "10.0.0.1:29500"
    remote: str = ""
    path: str = ""
    # tcp: a reply is owed to this side - it sent data after the last it received (tcp_info's
    # last_data_sent / last_data_recv): a request outstanding. False: nothing owed (it only
    # received, or its last request was answered) - a subscriber waits for a push. None: unknown.
    owed: Optional[bool] = None
    # tcp: seconds since this side last sent / last received data (tcp_info's last_data_sent
    # / last_data_recv, at the sample): how long a request has waited for its reply.
    last_sent_s: Optional[float] = None
    last_recv_s: Optional[float] = None
    # tcp: bytes received on it so far (tcpi_bytes_received): across samples, whether data
    # keeps arriving - a socket's recv() is no read() and never shows in the process's rchar.
    bytes_in: Optional[int] = None
    # tcp: what tcp_info says of delivery, where something is in flight or probed; else None.
    delivery: Optional[TcpDelivery] = None


class FdHolder(Record, frozen=True):
    """A process *outside* the job that holds an end (``inode``) of a pipe, fifo or unix socket
    a thread of the job blocks on - found by a bounded scan of the host's /proc/*/fd, so the
    chain of waits can go on past the job (``cat`` reading the other end, a stopped logger)."""

    inode: int
    pid: int
    name: str = ""
    state: str = "?"  # /proc/P/stat state: R S D T Z ...
    mode: FdMode = "?"
    kind: FdKind = "pipe"
    # utime + stime of the whole process (/proc/P/stat): across samples, whether it works -
    # a server that owes the job a reply and burns CPU is computing it.
    cpu_ticks: Optional[int] = None


FileLockKind = Literal["flock", "posix", "ofd", "lease", "?"]


class FileLock(Record, frozen=True):
    """A line of /proc/locks that concerns the job (``probes.file_locks``): a file lock a
    thread of the job waits for (``blocked``), or a lock held on the same file - whose holder
    is who ends the wait, in the job or outside it."""

    pid: int  # -1: an open file description lock (no owning process); 0: another PID namespace
    ordinal: int  # a waiter's is its blocker's
    blocked: bool
    kind: FileLockKind = "?"
    write: bool = True
    dev: str = ""  # "fe:00"
    inode: int = 0
    path: str = ""  # a waiter's: the file, as its fd names it
    name: str = ""  # /proc/PID/stat comm
    state: str = "?"  # /proc/PID/stat state


class FsWait(Record, frozen=True):
    """A thread of the job asleep in a filesystem that answers over a wire (``probes.mounts``):
    the file its blocked fd names, the mount it lies on (from the process's own mountinfo),
    and for a FUSE mount served on this host the daemon holding ``/dev/fuse`` for it - who
    can end the wait. ``daemon_pid`` None: no daemon found (another host, another namespace,
    or the scan's budget ran out)."""

    pid: int
    tid: int
    host: str = ""  # set by diag merge, like every record's host
    path: str = ""
    mount_point: str = ""
    fstype: str = ""  # "fuse.gcsfuse", "nfs4"
    source: str = ""  # "bucket", "server:/export"
    kind: FsKind = "local"
    daemon_pid: Optional[int] = None
    daemon_name: str = ""
    daemon_state: str = "?"  # /proc/PID/stat state of the daemon


NativeSource = Literal["perf", "syscall"]
# A CPU's spin-wait hint (x86 PAUSE; aarch64 YIELD, WFE, ISB) executed in a tight loop: code
# that waits for another party's write to memory (``diag.probes.spin_code``).
SpinHint = Literal["pause", "yield", "wfe", "isb"]
# Files whose functions every program calls (the C library, the loader): a PC there says
# little, and is named by its caller; "" is code in no file (the vDSO).
SYSTEM_LIBRARIES = ("libc.so", "libc-", "libpthread", "ld-linux", "ld-musl", "libdl", "librt")


def is_system_library(library: str) -> bool:
    return library == "" or library.startswith(SYSTEM_LIBRARIES)


class NativeSpot(Record, frozen=True):
    """A place a thread's native code was: a function of a mapped file."""

    library: str  # the file's base name: "libopen-pal.so.40.30.2"; "" when in no file (vdso)
    symbol: str = ""  # the enclosing ELF function ("opal_progress"); "" when none is known
    hits: int = 1  # of the PCs read, how many fell here
    # Found as a return address on the stack of a PC inside the C library or the loader (a
    # syscall wrapper, ``sched_yield``): the caller that went there, not a PC.
    caller: bool = False


class NativeLocation(Record, frozen=True):
    """Where a running thread's CPU went in native code (``diag.probes.native_location``):
    its PCs mapped through /proc/PID/maps to a library and an ELF symbol. A thread spinning in
    a communication library's progress loop waits for a message however much CPU it burns;
    the packs of ``diag.frameworks`` say which places those are. Bounded: ``spots`` holds at
    most 6, the most hits first; names are capped."""

    spots: Tuple[NativeSpot, ...] = ()
    pcs: int = 0  # PCs read (perf ticks in a few ms, or the one /proc/PID/task/TID/syscall gave)
    source: NativeSource = "syscall"
    # The PCs sat in a loop of a few bytes holding this spin-wait hint: a busy-wait for
    # memory another party writes, whatever library it is in; None when not (or not read).
    spin_hint: Optional[SpinHint] = None

    @property
    def library(self) -> str:
        return self.spots[0].library if self.spots else ""

    @property
    def symbol(self) -> str:
        return self.spots[0].symbol if self.spots else ""


class ThreadSample(Record, frozen=True, gc=False):
    """One OS thread at one instant: kernel view from /proc, Python view joined from py-spy.

    Untracked by the cycle collector (``gc=False``): every field is immutable (numbers,
    strings, tuples of numbers, a frozen ``NativeLocation``), so no cycle can run through
    one; a merge makes and frees 15 million of them (16,384 ranks x 300 threads x 3 samples)
    and skipping the collector's bookkeeping saves ~5% of its CPU."""

    tid: int
    name: str = ""
    state: str = "?"  # R S D Z T t X I, "?" when unreadable
    utime_ticks: int = 0
    stime_ticks: int = 0
    wchan: Optional[str] = None
    # /proc/P/task/T/syscall: "running", "none" (not in a syscall), a name ("futex") or "nr_N".
    syscall: Optional[str] = None
    syscall_nr: Optional[int] = None
    futex_addr: Optional[str] = None  # hex string: addresses exceed JSON's safe integers
    futex_op: Optional[int] = None
    syscall_fd: Optional[int] = None  # read/write: the fd it blocks on (0: waits on stdin)
    # The blocking syscall has a timeout (wakes by itself); False: waits until someone acts.
    wait_timed: Optional[bool] = None
    voluntary_ctxt_switches: Optional[int] = None
    nonvoluntary_ctxt_switches: Optional[int] = None
    # How long it had been off the CPU at this sample (0.0 running; None unread): from
    # /proc/P/task/T/sched's se.exec_start, so a wait's age is known at the first sample.
    off_cpu_s: Optional[float] = None
    # A timed wait's timeout (diag.probes.wait_deadline): the budget the blocking call was
    # given when it last went to sleep, and how long until it wakes by itself at the latest
    # (0.0: due now). None: no timeout, or not readable (no right, an unknown call).
    timeout_s: Optional[float] = None
    wakes_in_s: Optional[float] = None
    # Time spent runnable, waiting for a CPU, since it started (/proc/P/task/T/schedstat):
    # its growth across samples tells a starved or throttled thread from a blocked one.
    run_delay_ns: Optional[int] = None
    majflt: Optional[int] = None  # major faults so far (stat field 12): a read from disk
    # Joined from `py-spy dump` by OS thread id; None for native-only threads.
    py_thread_name: Optional[str] = None
    stack_id: Optional[str] = None
    py_active: Optional[bool] = None
    owns_gil: Optional[bool] = None
    # A running thread's native location (state R only; None: not read, or not running).
    native: Optional[NativeLocation] = None
    # Main thread only (``diag.probes.loop_wakers``): the fds its epoll wait watches (None: not
    # in one, or unreadable), how many more past the cap, and the signals its process has
    # handlers for (SigCgt) - who besides its own timers can wake an event loop.
    watched_fds: Optional[Tuple[int, ...]] = None
    watched_more: int = 0
    signals_caught: Optional[Tuple[int, ...]] = None


SchedPolicy = Literal["normal", "batch", "idle", "fifo", "rr", "deadline", "?"]
CgroupVersion = Literal["v1", "v2"]


class CpuLimits(Record, frozen=True):
    """What bounds a process's CPU (``diag.probes.cgroup_cpu``): its cgroup's CPU limit and
    throttling, its cpuset, its nice value and scheduling policy. A rank under a limit of a
    few hundredths of a core sits runnable (state R) with little CPU, which reads like a hang
    unless the throttling is read beside it.

    ``quota_cores``: the tightest limit between its group and the root (``cpu.max`` or
    ``cpu.cfs_quota_us / cpu.cfs_period_us``), None when there is none; ``limit_group`` the
    group that sets it. The ``nr_*`` and ``throttled_ns`` counters are that group's
    ``cpu.stat`` (its own group's when no limit), cumulative: the verdict reads their deltas.
    ``pressure_*``: cgroup v2 ``cpu.pressure`` "some" (None on v1). Paths are capped."""

    version: Optional[CgroupVersion] = None  # None: no cpu controller found
    group: str = ""
    limit_group: str = ""
    quota_cores: Optional[float] = None
    period_us: Optional[int] = None
    nr_periods: Optional[int] = None
    nr_throttled: Optional[int] = None
    throttled_ns: Optional[int] = None
    cpuset: str = ""  # "0-3,8": the CPUs it may run on ("" unread)
    cpuset_cpus: Optional[int] = None
    nice: int = 0
    policy: SchedPolicy = "normal"
    pressure_some_avg10: Optional[float] = None
    pressure_some_total_us: Optional[int] = None


class IoLimit(Record, frozen=True):
    """One device's I/O throttle in a process's cgroup (``diag.probes.cgroup_io``): v1
    ``blkio.throttle.*_bps_device``, v2 ``io.max``; bytes per second, None: no limit."""

    device: str  # "MAJ:MIN"
    read_bps: Optional[int] = None
    write_bps: Optional[int] = None


class MemLimits(Record, frozen=True):
    """What bounds a process's memory (``diag.probes.cgroup_mem``): its memory cgroup's limit
    against its usage, the group's limit events and major faults, pressure where the kernel
    has it. A rank thrashing against its limit is slow in reclaim, not hung. None: not read."""

    version: CgroupVersion = "v1"
    group: str = ""
    limit_bytes: Optional[int] = None  # v1 memory.limit_in_bytes (None: unlimited), v2 max
    high_bytes: Optional[int] = None  # v2 memory.high
    usage_bytes: Optional[int] = None  # v1 memory.usage_in_bytes, v2 memory.current
    high_events: Optional[int] = None  # v2 memory.events high
    max_events: Optional[int] = None  # v2 memory.events max; v1 memory.failcnt
    oom_kills: Optional[int] = None  # v2 memory.events oom_kill; v1 memory.oom_control
    pgmajfault: Optional[int] = None  # the group's memory.stat (v1 total_pgmajfault)
    pressure_some_avg10: Optional[float] = None  # v2 memory.pressure
    host_pressure_some_avg10: Optional[float] = None  # /proc/pressure/memory


class ProcessSample(Record, frozen=True):
    """One process at one instant. ``status`` is alive | zombie | exited | unreadable."""

    pid: int
    host: str = ""
    t_s: float = 0.0
    status: str = "alive"
    state: str = "?"
    utime_ticks: int = 0
    stime_ticks: int = 0
    # cutime + cstime: CPU of the children it has reaped - a rank waiting on short-lived
    # compilers (inductor's g++, nvcc) works through them even when no sample sees one.
    children_ticks: int = 0
    rss_bytes: int = 0
    vms_bytes: int = 0
    num_threads: int = 0
    io: Optional[IoCounters] = None
    threads: Tuple[ThreadSample, ...] = ()
    listen_ports: Tuple[int, ...] = ()
    # Client connections to those ports (at most MAX_SERVED a process; ``served_more`` counts
    # the rest): traffic and pending requests that /proc/P/io cannot see.
    served: Tuple[ServedConn, ...] = ()
    served_more: int = 0
    # Connections to those ports closed in the last 60 s (TIME_WAIT), by port.
    closed: Tuple[ClosedConns, ...] = ()
    # Python stacks: ok | not-python | failed (see the sample's failures) | skipped
    py_status: str = "skipped"
    # The stacks are the previous dump's: no thread ran since it (diag.probes.quiescence).
    stacks_reused: bool = False
    # Who read the stacks: "diag" (in-process, CPython 3.11-3.13) or "py-spy"; None: nobody.
    stack_reader: Optional[str] = None
    exit_code: Optional[int] = None
    # Big files open or mapped (diag.probes.open_files): what a loading job reads, how far.
    open_files: Tuple[OpenFile, ...] = ()
    # Pipe/fifo/socket ends (bounded: the fds a thread blocks on first); ``fd_ends_more``: the
    # ends past the cap, counted, not recorded.
    fd_ends: Tuple[FdEnd, ...] = ()
    fd_ends_more: int = 0
    # How many sockets it holds (the readlink pass; None: not read, or past its cap): a
    # process with none but its own wake-up pair has no connection anyone could write to.
    socket_fds: Optional[int] = None
    # Its cgroup CPU limit, throttling, cpuset, nice and policy (None: not read).
    cpu_limits: Optional[CpuLimits] = None
    # Its memory cgroup's limit, usage, events and faults (None: not read).
    mem_limits: Optional[MemLimits] = None
    # Its cgroup's I/O throttles per device (None: not read; (): none set).
    io_limits: Optional[Tuple[IoLimit, ...]] = None


class LogSample(Record, frozen=True):
    """One log file at one instant; ``tail`` lines are already redacted."""

    path: str
    host: str = ""
    pids: Tuple[int, ...] = ()
    exists: bool = True
    size_bytes: int = 0
    lines: int = 0
    # False: the file was already huge when first seen, so ``lines`` counts from diag's first
    # sample (deltas stay exact; the absolute number is "lines since diag attached").
    lines_exact: bool = True
    mtime_s: float = 0.0
    inode: int = 0
    head: Tuple[str, ...] = ()
    tail: Tuple[str, ...] = ()
    # Lines written since the previous sample that say a process died (redacted, at most 16):
    # a worker's death line can scroll out of reach before the next tail is read.
    deaths: Tuple[str, ...] = ()
    # Why the file was not read this sample (not a regular file, a symlink, unreadable).
    error: Optional[str] = None


class GpuProcess(Record, frozen=True):
    pid: int
    used_memory_bytes: Optional[int] = None


class GpuXid(Record, frozen=True):
    """One XID event (NVML's ``nvmlEventTypeXidCriticalError``): its number and when diag's
    worker took it from the event set (NVML's v2 event carries no time)."""

    xid: int
    t_s: float = 0.0


# NVML's clock-event reason bits (nvml.h; pynvml's ``nvmlClocksEventReason*`` and, on older
# bindings, ``nvmlClocksThrottleReason*`` - tests/test_gpu_health.py checks each value against
# the installed binding). Name, bit, in bit order.
ClockEventReason = Literal[
    "gpu_idle",
    "applications_clocks",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake",
    "display_clocks",
    "board_limit",
    "reliability",
]
CLOCK_EVENT_BITS: Tuple[Tuple[ClockEventReason, int], ...] = (
    ("gpu_idle", 0x1),
    ("applications_clocks", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake", 0x80),
    ("display_clocks", 0x100),
    ("board_limit", 0x200),
    ("reliability", 0x400),
)


# Each reason in words, as a report and a verdict say it.
CLOCK_EVENT_WORDS: Dict[str, str] = {
    "gpu_idle": "idle",
    "applications_clocks": "application clocks set below the maximum",
    "sw_power_cap": "its software power cap",
    "hw_slowdown": "HW slowdown",
    "sync_boost": "sync boost (held to its group's slowest GPU)",
    "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake": "HW power brake slowdown",
    "display_clocks": "display clock setting",
    "board_limit": "a board limit",
    "reliability": "a reliability limit",
}


def clock_event_names(mask: Optional[int]) -> Tuple[ClockEventReason, ...]:
    """The reasons set in an NVML clock-event mask, in bit order (unknown bits left out)."""
    if not mask:
        return ()
    return tuple(name for name, bit in CLOCK_EVENT_BITS if mask & bit)


class GpuDevice(Record, frozen=True):
    index: int
    host: str = ""  # set by diag merge: device indexes repeat on every host
    uuid: str = ""
    name: str = ""
    util_gpu_pct: Optional[float] = None
    util_mem_pct: Optional[float] = None
    mem_used_bytes: Optional[int] = None
    mem_total_bytes: Optional[int] = None
    power_w: Optional[float] = None
    power_limit_w: Optional[float] = None
    sm_clock_mhz: Optional[int] = None
    temperature_c: Optional[float] = None
    processes: Tuple[GpuProcess, ...] = ()
    pci_bus_id: str = ""
    error: Optional[str] = None  # e.g. "GPU is lost": the device answered nothing else
    # Why its clocks are what they are (issue #37): NVML's clock-event (throttle) reason mask
    # at this instant (``clock_event_names`` reads it) and the SM clock's ceiling.
    clock_event_mask: Optional[int] = None
    sm_clock_max_mhz: Optional[int] = None
    # Faults: XIDs that arrived since the previous read (the worker's event set, polled),
    # ECC error counts (volatile: since the driver loaded; aggregate: the board's life),
    # retired pages (before Ampere) or remapped rows (Ampere on), PCIe replays.
    xids: Tuple[GpuXid, ...] = ()
    ecc_volatile_corrected: Optional[int] = None
    ecc_volatile_uncorrected: Optional[int] = None
    ecc_aggregate_corrected: Optional[int] = None
    ecc_aggregate_uncorrected: Optional[int] = None
    retired_pages_sbe: Optional[int] = None
    retired_pages_dbe: Optional[int] = None
    retired_pages_pending: Optional[bool] = None
    remapped_rows_correctable: Optional[int] = None
    remapped_rows_uncorrectable: Optional[int] = None
    remap_pending: Optional[bool] = None
    remap_failed: Optional[bool] = None
    pcie_replays: Optional[int] = None
    # Fields NVML refused, by name ("ecc": "Not Supported", "pcie_replays": "Insufficient
    # Permissions"): each failed alone; the rest of the device was read.
    unread: Dict[str, str] = {}


class GpuSample(Record, frozen=True):
    """NVML at one instant. ``available`` False (no driver, no GPU) is normal, not a failure."""

    available: bool = False
    reason: Optional[str] = None
    driver_version: Optional[str] = None
    devices: Tuple[GpuDevice, ...] = ()


class RasRank(Record, frozen=True):
    """One rank of a communicator as NCCL RAS reports it (``missing``: it did not answer)."""

    rank: int
    host: str = ""
    pid: Optional[int] = None
    cuda_dev: Optional[int] = None
    missing: bool = False
    dead: bool = False
    async_error: int = 0
    aborted: bool = False
    coll_counts: Dict[str, int] = {}


class RasCommunicator(Record, frozen=True):
    comm_hash: str
    size: int = 0
    missing_ranks: int = 0
    ranks: Tuple[RasRank, ...] = ()


class RasSnapshot(Record, frozen=True):
    """One `ncclras` query. Old NCCL (no ``-f json``) leaves only the redacted ``text``."""

    nccl_version: str = ""
    communicators: Tuple[RasCommunicator, ...] = ()
    text: str = ""


class ProbeFailure(Record, frozen=True):
    """A probe that failed or timed out; the rest of the sample is kept."""

    probe: str
    reason: str
    duration_s: float = 0.0
    pid: Optional[int] = None
    host: str = ""
    sample: Optional[int] = None


class HostLoad(Record, frozen=True):
    """The host's CPU demand at one sample: the load average and the runnable tasks against
    the cores (/proc/loadavg), and CPU pressure stall information (/proc/pressure/cpu "some":
    the share of time at least one task waited for a CPU). None where the kernel has none."""

    cpus: int = 0
    load1: float = 0.0
    runnable: int = 0  # tasks runnable now (loadavg's 4th field, before the slash)
    psi_some_avg10: Optional[float] = None
    psi_some_total_us: Optional[int] = None


class Sample(Record, frozen=True):
    """Everything read in one sampling round; each process record has its own timestamp."""

    index: int
    t_s: float
    duration_s: float = 0.0
    processes: Tuple[ProcessSample, ...] = ()
    logs: Tuple[LogSample, ...] = ()
    gpu: Optional[GpuSample] = None
    failures: Tuple[ProbeFailure, ...] = ()
    probe_timings_s: Dict[str, float] = {}
    ras: Optional[RasSnapshot] = None
    # Host processes outside the job holding the other end of a wait (``FdHolder``), and
    # why that scan stopped short when it did (its PID or time budget ran out).
    fd_holders: Tuple[FdHolder, ...] = ()
    fd_scan_note: str = ""
    # Read only when a thread of the job waits on a file lock (flock, fcntl F_SETLKW).
    file_locks: Tuple[FileLock, ...] = ()
    file_locks_note: str = ""
    # Read only when a thread of the job sleeps in a filesystem wait (D state, FUSE, NFS).
    fs_waits: Tuple[FsWait, ...] = ()
    fs_waits_note: str = ""
    # A saturated host (issue 27): how long after its scheduled time this sample started (0:
    # on time; rates read the real timestamps), the optional probes a late sample skipped,
    # and the priority its burst ran at ("nice" / "rr"; "": the normal one).
    late_s: float = 0.0
    skipped_probes: Tuple[str, ...] = ()
    boost: str = ""
    # The host's CPU demand against its cores (None: not read).
    host_load: Optional[HostLoad] = None


def main_thread(ps: ProcessSample) -> Optional[ThreadSample]:
    """The thread whose stack and state stand for the process, one definition for the verdict,
    the wait-for graph and the report: the thread whose id is the pid; else Python's
    ``MainThread``; else the first thread with a Python stack; else the first thread."""
    named: Optional[ThreadSample] = None
    first_py: Optional[ThreadSample] = None
    for t in ps.threads:
        if t.tid == ps.pid:
            return t
        if named is None and t.py_thread_name == "MainThread":
            named = t
        if first_py is None and t.stack_id is not None:
            first_py = t
    return named or first_py or (ps.threads[0] if ps.threads else None)
