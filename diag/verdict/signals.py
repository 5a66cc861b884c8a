"""What the classifier knows about one process across a sample series (``ProcSignals``): the
record ``diag.verdict.features`` fills and every rule reads. Its own module so the code that
fills it (``features``, ``intervals``) and the code that reads it import one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from diag.model import ProcessInfo
from diag.text.roles import framework_role, named
from diag.verdict.native_waits import NativeSpin
from diag.verdict.polling import PollLoop
from diag.verdict.short_requests import ShortRequests
from diag.verdict.thread_wait import ThreadWait
from diag.verdict.waits import family

__all__ = ["COMPUTE_PCT", "DEAD_STATUSES", "ProcSignals"]

DEAD_STATUSES = ("zombie", "exited")
COMPUTE_PCT = 10.0  # % of one core: below this a thread is as good as still


@dataclass
class ProcSignals:
    """Everything the classifier knows about one process across the series."""

    key: Tuple[str, int]
    info: ProcessInfo
    samples: List[int] = field(default_factory=list)  # sample indices where it was seen
    statuses: List[str] = field(default_factory=list)
    dead_since: Optional[int] = None  # first sample index where it was zombie/exited
    exit_code: Optional[int] = None
    intervals: int = 0  # consecutive alive pairs, the number of deltas
    window_s: float = 0.0  # first to last alive sample
    cpu_pct: float = 0.0  # mean % of one core over the window
    compute_pct: float = 0.0
    spin_pct: float = 0.0
    compute_intervals: int = 0  # intervals with compute >= COMPUTE_PCT
    # Intervals whose main thread wanted a CPU most of the time (ran or waited runnable),
    # outside any known wait and poll loop: it computes whenever the host gives it a CPU - on
    # a saturated host at a share under COMPUTE_PCT, still work, not a wait.
    runnable_intervals: int = 0
    hot_label: str = ""  # the frame where compute burns most
    spin_label: str = ""
    main_wait: Optional[ThreadWait] = None  # main thread at the last alive sample
    main_stack_ids: List[Optional[str]] = field(default_factory=list)
    # The frame the main thread waited in at each alive sample ("" where it worked).
    main_wait_labels: List[str] = field(default_factory=list)
    main_moved: int = 0  # intervals where the main thread's stack changed
    stacks_moved: int = 0  # thread-intervals where any Python stack changed
    rss_delta_bytes: int = 0
    rss_last_bytes: int = 0
    read_delta_bytes: int = 0  # rchar: every read(), page cache included
    write_delta_bytes: int = 0  # wchar: pipes, sockets, files
    write_calls_delta: int = 0  # syscw: write()-family calls over the window
    listen_ports: Tuple[int, ...] = ()
    lock_waiters: List[Tuple[int, Optional[str], str]] = field(default_factory=list)
    main_wakeups: int = 0  # voluntary context switches of the main thread
    timer_threads: int = 0  # other Python threads that sleep, wait with a timeout, or woke
    py_ok: bool = False
    stopped: bool = False  # state T/t (SIGSTOP, a debugger) in every alive sample, or frozen
    traced: bool = False  # ... in state t every time: held by a tracer, not by SIGSTOP
    frozen: bool = False  # every thread in its cgroup freezer's wait in every alive sample
    # CPU of the children it reaped during the window (cutime + cstime), % of one core:
    # compilers and other short-lived helpers that no sample may catch alive.
    reaped_children_pct: float = 0.0
    # Bytes its clients' connections moved (both ways), from tcp_info: served requests.
    served_delta_bytes: int = 0
    # Bytes a loader got through its big files during the window: read() offsets (fdinfo
    # pos) and resident pages of mapped files - an mmap loader's page faults are no rchar.
    file_progress_bytes: int = 0
    # Every thread, in every sample, blocked without timeout on a private futex (op & 0x80:
    # a lock, queue, event of this process) with an unchanged stack: only a thread of this
    # process could end any of those waits, and all of them wait. It cannot wake by itself.
    self_blocked: bool = False
    served_conns: int = 0  # client connections open at the last sample (outside the job)
    # Connections to its ports accepted and closed between samples (TIME_WAIT): requests too
    # short for any sample to see (``diag.verdict.short_requests``).
    short_requests: Optional[ShortRequests] = None
    # Requests from outside the job that arrived before the window and got no answer in it.
    stale_requests: int = 0
    stale_age_s: float = 0.0  # the oldest of them: seconds since its data arrived
    stale_ports: Tuple[int, ...] = ()
    # The main thread polled in every sample (``diag.verdict.polling``): its CPU is the wait
    # it polls on, not work, and ``main_wait`` is that wait.
    poll: Optional[PollLoop] = None
    # A thread spinning in native code that waits (``native_waits.native_spin``: a pack's
    # progress engine, or a spin-wait loop told by its code): the main thread's, else the
    # first such thread's. Its CPU is ``spin_pct``, not compute.
    native_spin: Optional[NativeSpin] = None
    # Client connections from the job's own processes (``ServedConn.internal``), by port:
    # bytes moved over the window, and (port, age s) of requests unanswered through it. A
    # harness or an RL loop calling the job's own server - or a framework's RPC channel:
    # ``diag.verdict.work`` tells which by the port and the server.
    internal_served_bytes: Dict[int, int] = field(default_factory=dict)
    internal_stale: List[Tuple[int, float]] = field(default_factory=list)
    internal_conns: Dict[int, int] = field(default_factory=dict)  # port -> open at the end
    thread_names: Tuple[str, ...] = ()  # its threads' names (comm) at the last alive sample
    # Processes of one class read the same in every field of every sample but who they are
    # (``proc_classes``): a finder's "nothing here" for one holds for all. None: unknown.
    series_class: Optional[int] = None

    @property
    def pid(self) -> int:
        return self.key[1]

    @property
    def rank(self) -> Optional[int]:
        return self.info.rank

    @property
    def dead(self) -> bool:
        return self.dead_since is not None

    @property
    def main_family(self) -> Optional[str]:
        return family(self.main_wait.kind) if self.main_wait else None

    @property
    def name(self) -> str:
        """How sentences name it: by its framework's title when it has one ("scheduler TP1",
        "detokenizer (pid 2206)"), else "rank 3" / "pid 4242" - as ``wording.who`` does."""
        role = framework_role(self.info.cmdline, self.info.name)
        if role is not None:
            return named(role, self.rank, self.pid)
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
