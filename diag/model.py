"""Typed, frozen records of one capture, and the one versioned bundle format.

Everything diag writes or reads is one of these records: probes produce them, the classifier
reads them, the renderers turn them into views. They are msgspec Structs because a day-long
watch holds thousands of samples: msgspec encodes and decodes them an order of magnitude faster
than dataclasses + json, validates types on load, and imports in milliseconds.

Compatibility rule: a new field always gets a default, so bundles written by an older diag
still load (``diag report old.json``). Removing or retyping a field bumps ``SCHEMA_VERSION``.

Identity: a process is keyed by ``(host, pid)``; ``host`` is "" for a single-host capture and
is filled in by ``diag merge`` / ``--slurm-job``. Stacks are interned: threads carry a
``stack_id`` into ``Bundle.stacks`` so a stack that stays the same for a day is stored once.
Times ending in ``_s`` are Unix epoch seconds unless the name says otherwise (``duration_s``).
"""

from __future__ import annotations

from typing import Dict, Literal, Optional, Tuple

import msgspec

from diag.vocab import STATES, Role, VerdictState

SCHEMA_VERSION = 1

__all__ = ["STATES", "Role", "VerdictState"]  # re-exported: the vocabulary lives in diag.vocab


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of every record: immutable, keyword-only, defaults left out of the JSON."""


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


class OpenFile(Record, frozen=True):
    """A big regular file a process holds open or has mapped (weights, checkpoints, downloads).

    ``read``/``write``: an open fd, ``pos_bytes`` its offset (/proc/P/fdinfo/N ``pos:``), the
    progress of a read() loader or a download. ``mmap``: a file-backed mapping, ``size_bytes``
    the mapping's length and ``resident_bytes`` its Rss (/proc/P/smaps), the progress of an mmap
    loader (safetensors). ``path`` is capped in length."""

    path: str
    size_bytes: int = 0
    pos_bytes: Optional[int] = None
    resident_bytes: Optional[int] = None
    kind: Literal["read", "write", "mmap"] = "read"
    fd: Optional[int] = None


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


FsKind = Literal["fuse", "network", "local"]


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


class ThreadSample(Record, frozen=True):
    """One OS thread at one instant: kernel view from /proc, Python view joined from py-spy."""

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
    # Joined from `py-spy dump` by OS thread id; None for native-only threads.
    py_thread_name: Optional[str] = None
    stack_id: Optional[str] = None
    py_active: Optional[bool] = None
    owns_gil: Optional[bool] = None


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


class ProcessInfo(Record, frozen=True):
    """What does not change about a process: identity, role, rank, redacted argv and env."""

    pid: int
    host: str = ""
    ppid: Optional[int] = None
    name: str = ""
    exe: Optional[str] = None
    cmdline: Tuple[str, ...] = ()
    # launcher | worker | rank | server | helper | process
    role: Role = "process"
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    rank_source: Optional[str] = None  # e.g. "env:RANK", "argv:--tp-rank", "title:..._TP3"
    env: Dict[str, str] = {}
    start_time_s: Optional[float] = None
    first_seen_sample: int = 0
    uid: Optional[int] = None  # the process's owner: the only user whose dump files diag reads


class HostInfo(Record, frozen=True):
    hostname: str = ""
    kernel: str = ""
    machine: str = ""
    cpu_count: int = 0
    clk_tck: int = 100
    page_size_bytes: int = 4096
    boot_time_s: Optional[float] = None
    python_version: str = ""
    diag_version: str = ""
    pyspy_version: Optional[str] = None


class HostEntry(Record, frozen=True):
    """One host of a merged (multi-node) bundle: its identity, whether it was captured, and its
    clock. ``clock_offset_s`` is this host's clock minus the reference clock, *measured* (the
    Slurm controller timestamps a line each node prints); None when nothing measured it.
    ``start_offset_s`` is how far this host's first sample lies from the reference host's after
    any measured correction: skew and staggered starts are shown, never silently absorbed."""

    name: str
    status: str = "ok"  # ok | failed (no bundle from this host)
    reason: str = ""
    info: HostInfo = HostInfo()
    clock_offset_s: Optional[float] = None
    clock_offset_error_s: Optional[float] = None  # upper bound on the measurement's error
    clock_source: str = ""  # "srun-stdout" when measured; "" when not
    start_offset_s: Optional[float] = None
    samples: int = 0
    samples_dropped: int = 0  # samples past the shortest host's series, left out of the merge
    complete: bool = True


class Target(Record, frozen=True):
    """What was asked for: a PID, or a command diag launched (``launched``)."""

    root_pid: Optional[int] = None
    command: Tuple[str, ...] = ()
    launched: bool = False
    exit_code: Optional[int] = None
    log_paths: Tuple[str, ...] = ()
    hosts: Tuple[str, ...] = ()


class CollectiveRecord(Record, frozen=True):
    """One Flight Recorder entry: a collective (or p2p op) as one rank recorded it."""

    seq: int  # collective_seq_id (p2p_seq_id for p2p ops)
    op: str  # profiling_name, e.g. "nccl:all_reduce"
    state: str = ""  # scheduled | started | completed
    is_p2p: bool = False
    created_s: Optional[float] = None
    sizes: str = ""  # input sizes, compact, e.g. "[[4]]"
    # How long it ran on the device (NCCL with timing on: ``duration_ms``); None elsewhere. A
    # rank that arrives last at a collective waits least inside it.
    duration_ms: Optional[float] = None


class RankCollectives(Record, frozen=True):
    """Flight Recorder view of one rank in one process group (seq ids count per group)."""

    rank: int
    pg: str = ""
    pg_ranks: Tuple[int, ...] = ()
    host: str = ""
    pid: Optional[int] = None
    source: str = ""  # the dump file
    dumped_s: Optional[float] = None
    last_enqueued_seq: Optional[int] = None
    last_started_seq: Optional[int] = None
    last_completed_seq: Optional[int] = None
    recent: Tuple[CollectiveRecord, ...] = ()  # the last few entries, oldest first


class LogSignal(Record, frozen=True):
    """One kind of NCCL/CUDA log line seen for one rank: how often, the last one, when."""

    kind: str  # nccl_warn | nccl_error | watchdog_timeout | cuda_error | xid | nccl_info
    count: int = 0
    last_line: str = ""
    last_t_s: Optional[float] = None
    path: str = ""


class RankNcclLog(Record, frozen=True):
    """NCCL evidence from one rank's logs, including torch watchdog sequence numbers."""

    rank: Optional[int] = None
    pid: Optional[int] = None
    host: str = ""
    signals: Tuple[LogSignal, ...] = ()
    timeout_seq: Optional[int] = None
    timeout_op: Optional[str] = None
    last_enqueued_seq: Optional[int] = None
    last_completed_seq: Optional[int] = None


class Evidence(Record, frozen=True):
    """One observation behind a verdict; ``section`` is the report anchor that shows it."""

    signal: str
    detail: str
    ranks: Tuple[int, ...] = ()
    pids: Tuple[int, ...] = ()
    samples: Tuple[int, ...] = ()
    section: str = ""


class Suspect(Record, frozen=True):
    """A process the verdict blames; ``pid`` 0 when it was gone before diag looked (a log line
    named it). ``chain``: the chain of waits that ends at it, from the wait-for graph
    ("ranks 0, 2 → (peer) → rank 1: stopped - `kill -CONT 4242`")."""

    pid: int
    rank: Optional[int] = None
    host: str = ""
    reason: str = ""
    chain: str = ""


class RankClass(Record, frozen=True):
    """Ranks whose main-thread stacks match (LLNL STAT's equivalence classes)."""

    signature: str
    label: str
    ranks: Tuple[int, ...] = ()
    pids: Tuple[int, ...] = ()
    stack_id: Optional[str] = None
    # The host of each of ``pids``, in order; empty when every one is on the local host. PIDs
    # repeat across the nodes of a merged bundle: (host, pid) names a process.
    hosts: Tuple[str, ...] = ()

    def members(self) -> Tuple[Tuple[str, int], ...]:
        """(host, pid) of each process of the class."""
        hosts = self.hosts if len(self.hosts) == len(self.pids) else ("",) * len(self.pids)
        return tuple(zip(hosts, self.pids))


class RankPhase(Record, frozen=True):
    """What one rank is doing while the job starts up (diag.verdict.startup): a phase
    (reading weights, converting, compiling, initialising communication, downloading,
    warm-up, serving, waiting), how far it is and when it should be done - with the basis of
    that estimate. ``eta_s`` is None when nothing moved over the capture."""

    rank: Optional[int] = None
    pid: int = 0
    host: str = ""
    phase: str = ""
    progress_pct: Optional[float] = None
    eta_s: Optional[float] = None
    basis: str = ""  # "at 1.1 GiB/s, ~4 min for the remaining 27 GiB", "tqdm: 01:18 left"
    evidence: str = ""  # what shows the phase: the file, the frame, the child process


# A process's state in the wait-for graph (diag.verdict.graph), and what can end a wait.
NodeState = Literal[
    "computing",
    "working",  # its output moves (writes, answers requests, its log grows, memory grows)
    "spinning",
    "blocked",
    "sleeping",
    "stopped",
    "disk",
    "zombie",
    "exited",
    "serving",
]
EdgeKind = Literal[
    "peer",
    "child",
    "lock",
    "queue",
    "result",
    "request",
    "pipe",
    "unix",
    "tcp",
    "file-lock",
    "outside",
]
# How a chain of waits ends: at a stopped / dead / computing / D-state node, at the outside,
# at a lock or queue only its own process can release, in a cycle, or nowhere known.
ChainEnd = Literal[
    "stopped",
    "dead",
    "computing",
    "working",
    "disk",
    "outside",
    "lock",
    "self",
    "cycle",
    "stuck",
]


class WaitNode(Record, frozen=True):
    """One process of the wait-for graph (its threads summarised: the main thread's wait and
    how many threads are in each kernel state), or a door to the outside (``key`` starting
    with ``outside:``, pid 0: clients, the network, a timer, stdin)."""

    # "host/pid", or "outside:<what>". Written as "node": a JSON field named "key" reads as a
    # secret to the redactor's last pass over every file, which would blank it.
    key: str = msgspec.field(default="", name="node")
    pid: int = 0
    host: str = ""
    rank: Optional[int] = None
    label: str = ""  # "rank 3", "pid 12 cc1plus", "outside: clients"
    state: NodeState = "blocked"
    detail: str = ""  # the main thread's wait, thread counts, ports, unanswered requests


class WaitEdge(Record, frozen=True):
    """``src`` waits on something only ``dst`` can end; ``evidence`` says what showed it."""

    src: str = ""
    dst: str = ""
    kind: EdgeKind = "peer"
    evidence: str = ""


class WaitGraph(Record, frozen=True):
    """Who waits on whom: nodes, edges, the chains followed from the participants to where
    they end (one line each, e.g. "ranks 0-2 → (peer) → rank 3: stopped - `kill -CONT 42`"),
    and the keys of the nodes those chains end at."""

    nodes: Tuple[WaitNode, ...] = ()
    edges: Tuple[WaitEdge, ...] = ()
    chains: Tuple[str, ...] = ()
    ends: Tuple[str, ...] = ()
    # How each line of ``chains`` ends, in order (``ChainEnd``); empty in older bundles.
    reasons: Tuple[str, ...] = ()
    # The node keys each line of ``chains`` ends at (a cycle: its members); empty in older
    # bundles.
    line_ends: Tuple[Tuple[str, ...], ...] = ()


StragglerBasis = Literal["samples", "own-wait", "flight-recorder", "none"]


class RankLoad(Record, frozen=True):
    """One rank's share of a capture (``diag.verdict.stragglers``): in how many samples its
    main thread waited on its peers (a collective, a barrier, a c10d store) or computed, its
    CPU, and its Flight Recorder figures where a dump exists. The rank the others wait for
    computes while they wait."""

    rank: int
    pid: int = 0
    host: str = ""
    samples: int = 0  # samples its main thread was seen in
    peer_wait_samples: int = 0  # in a collective/barrier/rendezvous wait
    compute_samples: int = 0  # outside any known wait
    wait_op: str = ""  # the collective it waited in most, e.g. "all_reduce"
    # In a wait of its own, not on its peers (a data loader's queue, a sleep, a read): the rank
    # the others wait for may be waiting too - on its input.
    own_wait_samples: int = 0
    own_wait_op: str = ""  # the frame it waited in most there, e.g. "fetch_batch"
    main_cpu_pct: float = 0.0  # its main thread, % of one core over the capture
    cpu_pct: float = 0.0  # the whole process, % of one core
    fr_last_seq: Optional[int] = None  # highest collective sequence id it enqueued
    # Mean time after the first rank that it enqueued the same collective (same host clock).
    fr_enqueue_lag_ms: Optional[float] = None
    fr_duration_ms: Optional[float] = None  # mean device duration of its collectives

    @property
    def peer_wait_share(self) -> float:
        return self.peer_wait_samples / self.samples if self.samples else 0.0

    @property
    def compute_share(self) -> float:
        return self.compute_samples / self.samples if self.samples else 0.0

    @property
    def own_wait_share(self) -> float:
        return self.own_wait_samples / self.samples if self.samples else 0.0


class Stragglers(Record, frozen=True):
    """The straggler analysis of a multi-rank job that progresses or is slow: each rank's
    load (at most ``MAX_RANK_LOADS`` kept, stragglers first; ``ranks_more`` counts the rest),
    the ranks the others wait for (empty: no outlier, and ``summary`` says so), their nodes in
    a merged bundle, and the sentence with the figures. ``basis``: what showed it."""

    ranks: Tuple[RankLoad, ...] = ()
    ranks_more: int = 0
    suspects: Tuple[int, ...] = ()  # ranks
    suspect_hosts: Tuple[str, ...] = ()  # the straggler node(s); empty on one host
    summary: str = ""
    basis: StragglerBasis = "none"


class RuleMatch(Record, frozen=True):
    """A rule of the table that also matched a capture but came after the one that decided:
    what it would have said, and why the decider outranks it."""

    # a ``diag.vocab.RuleId`` when written; a plain string so renames never break old bundles
    rule: str
    state: VerdictState
    overruled: str = ""  # "a stopped process outranks what the others show"


class Verdict(Record, frozen=True):
    """The judgement of a capture. ``rule`` is the id of the rule of the table that decided
    (``diag.verdict.rules``; "" in bundles written before the table had ids), ``also_matched``
    the later rules that would have decided too, ``problems`` what the verdict had to do
    without (a bug in the wait-for graph or in a rule, recorded instead of raised)."""

    state: VerdictState
    confidence: float = 0.0
    summary: str = ""
    evidence: Tuple[Evidence, ...] = ()
    suspects: Tuple[Suspect, ...] = ()
    classes: Tuple[RankClass, ...] = ()
    exit_code: Optional[int] = None
    # Startup phases per rank, and warnings (a framework timeout that fires before loading ends).
    phases: Tuple[RankPhase, ...] = ()
    warnings: Tuple[str, ...] = ()
    # Who waits on whom (diag.verdict.graph); None in bundles written before it existed.
    graph: Optional[WaitGraph] = None
    rule: str = ""
    also_matched: Tuple[RuleMatch, ...] = ()
    problems: Tuple[str, ...] = ()
    # Who the ranks of a progressing or slow job wait for (diag.verdict.stragglers); None for
    # one rank, other states, and bundles written before it existed.
    stragglers: Optional[Stragglers] = None


class Bundle(Record, frozen=True, omit_defaults=False):
    """The whole capture: what `diag report` renders and `diag merge` combines."""

    schema_version: int = SCHEMA_VERSION
    created_s: float = 0.0
    host: HostInfo = HostInfo()
    target: Target = Target()
    processes: Tuple[ProcessInfo, ...] = ()
    stacks: Dict[str, Stack] = {}
    samples: Tuple[Sample, ...] = ()
    failures: Tuple[ProbeFailure, ...] = ()
    verdict: Optional[Verdict] = None
    collectives: Tuple[RankCollectives, ...] = ()  # Flight Recorder dumps found
    nccl_logs: Tuple[RankNcclLog, ...] = ()
    # Multi-node: one entry per host (diag merge / --slurm-job); empty for a single host.
    hosts: Tuple[HostEntry, ...] = ()
    # False when a watch was cut short (SIGKILL, full disk) and rebuilt from its journal.
    complete: bool = True


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
