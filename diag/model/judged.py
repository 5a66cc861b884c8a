"""What the verdict adds: collectives, NCCL log signals, the verdict itself with its
evidence, suspects, phases, wait-for graph and stragglers (``diag.model``)."""

from __future__ import annotations

from typing import Literal, Optional, Tuple

import msgspec

from diag.model.base import Record
from diag.vocab import RankPhaseName, VerdictState


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


class RankPhase(Record, frozen=True, kw_only=True):
    """What one rank is doing while the job starts up (diag.verdict.startup): a phase
    (reading weights, converting, compiling, initialising communication, downloading,
    warm-up, serving, waiting), how far it is and when it should be done - with the basis of
    that estimate. ``eta_s`` is None when nothing moved over the capture."""

    rank: Optional[int] = None
    pid: int = 0
    host: str = ""
    phase: RankPhaseName
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
    # A framework's own flow control or admission pause: a stream writer waits for its peer
    # to read, a worker paused for memory waits for it to fall (diag.verdict.flow_control).
    "flow",
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


StragglerBasis = Literal["samples", "own-wait", "flight-recorder", "gpu-throttle", "none"]


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


class CpuHoldRecord(Record, frozen=True):
    """What kept one process from the CPU over a capture (``diag.verdict.machine``): the most
    any of its threads waited on a run queue, in how many samples that thread was runnable,
    the share of its cgroup's periods throttled (None: no limit, or too few periods), and
    ``cause`` when that is why it is slow ("limit", "priority"; "" otherwise)."""

    pid: int
    host: str = ""
    rank: Optional[int] = None
    window_s: float = 0.0
    run_delay_s: float = 0.0
    runnable_samples: int = 0
    samples: int = 0
    throttled_share: Optional[float] = None
    throttled_s: Optional[float] = None
    cause: str = ""
    # Memory (``diag.verdict.memory``): its group's usage and limit at the last sample, the
    # limit events and major faults per second over the capture, the samples a thread of it
    # waited in reclaim, and whether memory pressure is why it is slow.
    mem_usage_bytes: Optional[int] = None
    mem_limit_bytes: Optional[int] = None
    mem_limit_events: int = 0
    major_faults_per_s: float = 0.0
    reclaim_samples: int = 0
    mem_pressure: bool = False


MAX_CPU_HOLDS = 64  # processes a verdict keeps: those held back first, then by rank


class GpuHealthRecord(Record, frozen=True):
    """One GPU over a capture as the verdict read it (``diag.verdict.gpu_health``): its
    median SM clock against its ceiling, the clock-event reasons set in most of its samples
    (``CLOCK_EVENT_BITS`` names), whether that throttles it, the XIDs that arrived during the
    capture, ECC counts (volatile: since the driver loaded) and PCIe replays with their growth
    over the capture, remapped rows / retired pages, the faults in words, why its work ended
    (``fatal``: XID 79, an uncontained ECC error, lost), and what NVML refused to say."""

    index: int
    host: str = ""
    rank: Optional[int] = None
    pid: Optional[int] = None
    samples: int = 0
    sm_clock_mhz: Optional[int] = None
    sm_clock_max_mhz: Optional[int] = None
    reasons: Tuple[str, ...] = ()
    throttled: bool = False
    xids: Tuple[int, ...] = ()
    ecc_uncorrected: Optional[int] = None
    ecc_corrected: Optional[int] = None
    ecc_uncorrected_new: Optional[int] = None
    pcie_replays: Optional[int] = None
    pcie_replays_new: Optional[int] = None
    remapped_rows: Optional[int] = None
    retired_pages: Optional[int] = None
    faults: Tuple[str, ...] = ()
    fatal: str = ""
    unread: Tuple[str, ...] = ()


class RuleMatch(Record, frozen=True):
    """A rule of the table that also matched a capture but came after the one that decided:
    what it would have said, and why the decider outranks it."""

    # a ``diag.vocab.RuleId`` when written; a plain string so renames never break old bundles
    rule: str
    state: VerdictState
    overruled: str = ""  # "a stopped process outranks what the others show"


class VerdictChange(Record, frozen=True):
    """A watch's verdict changed at this sample (``diag watch``: the monitor's history). How
    long a state held is the time to the next change, or to the watch's last sample."""

    t_s: float
    sample: int
    state: VerdictState
    rule: str = ""
    summary: str = ""  # capped at ``HISTORY_SUMMARY_CHARS``


HISTORY_SUMMARY_CHARS = 300
MAX_HISTORY = 256  # changes kept: the first, then the most recent (a flapping day stays small)


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
    # Since when the waiting ranks have not run (epoch s) and for how long at the last sample
    # (diag.verdict.wait_age, from the kernel's se.exec_start); None when not known or short.
    quiet_since_s: Optional[float] = None
    quiet_for_s: Optional[float] = None
    # Since when nothing in the job moved: its ranks' last run, its logs' last write, the last
    # byte between its processes, bounded by its start (diag.verdict.job_quiet); None if unknown.
    job_quiet_since_s: Optional[float] = None
    # Since when a stopped process of the job has been stopped, at least (epoch s): its
    # threads' last run (diag.verdict.wait_age.stopped_age); None when not stopped or unknown.
    stopped_since_s: Optional[float] = None
    # What kept each process from the CPU (diag.verdict.machine), at most ``MAX_CPU_HOLDS``;
    # empty in bundles written before the CPU limits were read.
    cpu_holds: Tuple[CpuHoldRecord, ...] = ()
    # Each GPU's clocks, throttle reasons and faults (diag.verdict.gpu_health), at most 64;
    # empty in bundles written before they were read.
    gpu_health: Tuple[GpuHealthRecord, ...] = ()
