"""The closed sets every stage shares: verdict states, leans, roles, wait families, rule ids.

One definition each, as ``Literal`` types, so mypy strict catches a typo (``"deadlock"`` for
``"deadlocked"``) anywhere a state, a role or a rule id is written, and the tuples beside them
list the members for code that iterates (the report's legend, the CLI's ``--fail-on``).

Rule ids are ``Literal`` in the rule table, but a bundle stores them as plain strings: a rule
renamed or removed later must not make an old bundle unreadable.
"""

from __future__ import annotations

from typing import Literal, Tuple, get_args

# What the verdict says about a job, in the order a person reads them.
VerdictState = Literal["progressing", "slow", "idle", "deadlocked", "exited", "unknown"]
STATES: Tuple[VerdictState, ...] = get_args(VerdictState)

# How an evidence source leans the verdict: busy-looking but not progressing ("stuck"), real
# work the CPU view cannot see ("work"), a counter that advanced ("progress").
Lean = Literal["stuck", "work", "progress"]

# What an evidence line is about (``Evidence.signal``; stored as a plain string so a bundle
# from a diag that knew other signals still loads).
EvidenceSignal = Literal[
    "cpu",
    "spin",
    "io",
    "memory",
    "futex",
    "log",
    "ports",
    "stacks",
    "exited",
    "single-sample",
    "gpu",
    "gpu-error",
    "evidence-error",
    "straggler",
    "no-straggler",
    "fr-all-waiting",
    "fr-lag",
    "fr-mismatch",
    "fr-missing",
    "fr-not-started",
    "nccl-log-warn",
    "nccl-log-cuda-error",
    "nccl-log-xid",
    "nccl-log-nccl-error",
    "nccl-ras",
    "nccl-ras-frozen",
    "nccl-ras-progress",
    "nccl-watchdog-lag",
    "nccl-watchdog-timeout",
]
EVIDENCE_SIGNALS: Tuple[EvidenceSignal, ...] = get_args(EvidenceSignal)

# The report's sections an evidence line links to (``Evidence.section``; ``diag.render.build``
# titles each; stored as a plain string).
ReportSection = Literal[
    "verdict",
    "evidence",
    "timelines",
    "matrix",
    "ranks",
    "stacks",
    "futex",
    "stragglers",
    "machine",
    "gpu",
    "collectives",
    "nccl-logs",
    "hosts",
    "env",
    "host",
    "logs",
    "failures",
]
REPORT_SECTIONS: Tuple[ReportSection, ...] = get_args(ReportSection)

# The kinds of line the collector's collective-log reader (``diag.probes.nccl.lines``) sorts a
# rank's log into, most specific first (``LogSignal.kind``; stored as a plain string).
CollectiveLogKind = Literal[
    "watchdog_timeout",
    "watchdog_hang",
    "xid",
    "cuda_error",
    "nccl_error",
    "nccl_warn",
    "nccl_info",
]
COLLECTIVE_LOG_KINDS: Tuple[CollectiveLogKind, ...] = get_args(CollectiveLogKind)
# What a kind of collective-log line means for the verdict: a failure (a suspect when the rank
# then exited), a warning (counted), a collective that timed out (its waiters named).
LogKindMeaning = Literal["failure", "warning", "timeout"]

# Where a process sits in the job's tree (``ProcessInfo.role``).
Role = Literal["rank", "launcher", "worker", "helper", "process"]

# What a thread's wait can be ended by (``diag.verdict.waits.FAMILY``): a peer rank, a client
# of a server, another thread's lock, a child's exit, a timer, a pool's result, SIGCONT, input
# on stdin, a file lock's holder.
WaitFamily = Literal[
    "peer", "serve", "lock", "child", "sleep", "result", "stopped", "stdin", "file-lock"
]

# What a thread waits in (``diag.verdict.thread_wait.ThreadWait.kind``; ``waits.FAMILY``
# maps each to the family above, or to none). The kinds a frame can name (a pack's
# ``FrameWait.kind``) come first; then the kinds only the kernel or a finder gives: a C call
# of a rank blocked straight from user code (``native-peer``), a poll loop that polls for work
# (``poll``), a stopped thread, a file lock, a write to a full pipe or socket (``write-full``),
# the open of a named pipe no one opens the other end of (``fifo-open``), uninterruptible
# sleep (``disk``), and a sleep the kernel names in no table (``blocked``).
FrameWaitKind = Literal[
    "collective",
    "rendezvous",
    "synchronize",
    "queue",
    "event-loop",
    "accept",
    "socket-read",
    "stdin",
    "join",
    "condition",
    "lock",
    "result",
    "child",
    "sleep",
]
WaitKind = Literal[
    FrameWaitKind,
    "native-peer",
    "poll",
    "stopped",
    "file-lock",
    "write-full",
    "fifo-open",
    "disk",
    "blocked",
]
WAIT_KINDS: Tuple[WaitKind, ...] = get_args(WaitKind)

# The phases of a starting job (``diag.verdict.startup``; a pack's ``StartupSign.phase``).
StartupPhase = Literal[
    "loading weights",
    "converting weights",
    "compiling",
    "initialising communication",
    "downloading",
    "warming up",
]
STARTUP_PHASES: Tuple[StartupPhase, ...] = get_args(StartupPhase)
# What a rank is doing while the job starts (``RankPhase.phase``): a start-up phase, or -
# beside the ranks in one - serving or waiting on its peers.
RankPhaseName = Literal[StartupPhase, "serving", "waiting"]

# What kind of filesystem a thread waits in (``FsWait.kind``, ``diag.probes.mounts``): one a
# user-space daemon serves through ``/dev/fuse``, one that answers over the network, or local.
FsKind = Literal["fuse", "network", "local"]

# The families of the rule table (``diag.verdict.rules``), one module each.
RuleFamily = Literal["deaths", "motion", "graph", "peers", "locks", "doors", "machine", "flow"]

# The rules of the table, in no particular order (the table's order is in
# ``diag.verdict.rules.TABLE``).
RuleId = Literal[
    "rank_died",
    "flow_paused",
    "rank_stopped",
    "log_names_dead_rank",
    "store_host_died",
    "gpu_failed",
    "blocked_on_itself",
    "cpu_held_back",
    "memory_pressure",
    "waits_on_itself",
    "waits_on_filesystem",
    "requests_pile_up",
    "output_reports_failure",
    "answers_requests",
    "alone_in_phase",
    "silence_within_rhythm",
    "output_moves",
    "consumes_feed",
    "spins_for_dead_thread",
    "waits_for_dead_thread",
    "spins_with_no_party",
    "works_silently",
    "children_work",
    "calls_itself",
    "pipe_outlives_child",
    "waits_on_stopped_outsider",
    "peer_unreachable",
    "waits_for_file_lock",
    "waits_for_nodes_to_join",
    "rendezvous_forming",
    "collective_laggard",
    "server_feeds_ranks",
    "peer_backs_off",
    "peers_wait",
    "results_never_come",
    "lock_cycle",
    "gpu_spins",
    "lock_without_door",
    "lock_behind_clients",
    "log_reports_death",
    "requests_unanswered",
    "pipe_full_in_dead_chain",
    "chains_never_end",
    "polls_for_stale_lock_file",
    "timer_cannot_end",
    "wakes_only_itself",
    "waits_for_outside",
    "pipe_full",
    "chains_end_at_doors",
    "waits_on_quiet_peer",
    "reply_owed",
    "nothing_can_wake",
]
RULE_IDS: Tuple[RuleId, ...] = get_args(RuleId)

# How a verdict was reached without a rule: nothing sampled, nothing readable, every process
# gone. Recorded in ``Verdict.rule`` like a rule id.
PreRuleId = Literal["no_samples", "nothing_readable", "target_exited"]
PRE_RULE_IDS: Tuple[PreRuleId, ...] = get_args(PreRuleId)
