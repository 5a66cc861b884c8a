"""The report's view-model: plain, typed, already-formatted data the templates only loop over.

Every decision (what is odd, which anchor an evidence item links to, how a number is printed,
which samples a timeline keeps) is made while building these records, so the HTML template,
the Markdown and the terminal summary stay dumb and agree with each other, and golden tests can
compare one JSON document instead of scraping HTML. Frozen msgspec Structs: cheap to build by
the hundred thousand and encodable as-is for the golden files.
"""

from __future__ import annotations

from typing import Optional, Tuple

from diag.render.view_base import Spark, View
from diag.render.view_graph import GraphArrow, GraphBox, GraphView
from diag.render.view_machine import MachineRow, MachineView
from diag.render.view_stragglers import StragglerRow, StragglersView
from diag.render.view_tables import (
    CollectiveRow,
    EnvDiff,
    EnvRow,
    FailureRow,
    FutexGroup,
    Gpu,
    GpuRow,
    HostRow,
    LogView,
    NcclLogRow,
    ProcCommand,
    RasRow,
    TimingRow,
)


class SuspectView(View, frozen=True):
    label: str
    reason: str = ""
    anchor: str = ""
    chain: str = ""  # the chain of waits that ends at it


class PhaseView(View, frozen=True):
    """One rank's startup phase (the verdict's ``RankPhase``), formatted."""

    label: str  # "rank 0"
    anchor: str
    phase: str  # "loading weights"
    text: str  # "62% · ETA 3 min 10 s"
    bar_pct: Optional[int] = None  # the progress bar's width; None: no progress known
    basis: str = ""
    evidence: str = ""


class HistoryView(View, frozen=True):
    """One state a watch's verdict held: from when, for how long, decided by which rule."""

    state: str
    css: str
    since: str  # "2026-12-06 03:12:09 UTC"
    held: str  # "14 min 3 s"
    rule: str = ""


class Banner(View, frozen=True):
    state: str
    css: str
    has_verdict: bool
    source: str  # "bundle" | "computed" | "none"
    confidence_pct: Optional[int] = None
    summary: str = ""
    suspects: Tuple[SuspectView, ...] = ()
    phases: Tuple[PhaseView, ...] = ()
    warnings: Tuple[str, ...] = ()
    # Why this verdict: the rule of the table that decided ("" in bundles older than rule
    # ids), the later rules that matched too, each "id → state (overruled: why)", and what the
    # verdict had to do without (a graph or a rule that failed).
    decided_by: str = ""
    also_matched: Tuple[str, ...] = ()
    problems: Tuple[str, ...] = ()
    # A watch's verdict history (each state change, how long it held); empty for a capture.
    history: Tuple[HistoryView, ...] = ()


class EvidenceView(View, frozen=True):
    signal: str
    detail: str
    anchor: str
    section_title: str
    ranks_text: str = ""
    samples_text: str = ""


class Meta(View, frozen=True):
    title: str
    created: str
    span: str
    samples: int
    processes: int
    counts: str = ""  # "4 samples, 5 processes"
    hosts: Tuple[str, ...] = ()
    complete: bool = True
    command: str = ""
    diag_version: str = ""
    schema_version: int = 1


class TimelineRow(View, frozen=True):
    label: str
    anchor: str
    suspect: bool
    sparks: Tuple[Spark, ...]
    badge: str = ""  # fmt.proc_badge: "stopped (T)", "zombie", "D: uninterruptible"


class TimelineGroup(View, frozen=True):
    host: str
    rows: Tuple[TimelineRow, ...]


class Timelines(View, frozen=True):
    metrics: Tuple[str, ...]
    scales: Tuple[str, ...]
    groups: Tuple[TimelineGroup, ...]
    width: int
    height: int
    note: str = ""


class MatrixCell(View, frozen=True):
    letter: str
    css: str
    title: str
    odd: bool = False


class MatrixRow(View, frozen=True):
    label: str
    anchor: str
    suspect: bool
    cells: Tuple[MatrixCell, ...]
    badge: str = ""


class LegendEntry(View, frozen=True):
    letter: str
    css: str
    top: str
    where: str
    ranks_text: str
    stack_anchor: str = ""


class ClassView(View, frozen=True):
    label: str
    ranks_text: str
    signature: str
    stack_anchor: str = ""


class Matrix(View, frozen=True):
    columns: Tuple[str, ...]
    rows: Tuple[MatrixRow, ...]
    legend: Tuple[LegendEntry, ...]
    classes: Tuple[ClassView, ...] = ()
    note: str = ""


class ThreadRow(View, frozen=True):
    tid: int
    name: str
    state: str
    wchan: str
    syscall: str
    futex: str
    futex_anchor: str
    cpu_delta_ticks: int
    cpu_pct: str
    top: str
    stack_anchor: str


class StackRun(View, frozen=True):
    samples: str
    stack_anchor: str
    stack_label: str
    top: str
    change: str = ""


class PyThreadView(View, frozen=True):
    name: str
    tid: int
    runs: Tuple[StackRun, ...]
    changes: int
    note: str = ""


class NativeGroup(View, frozen=True):
    count: int
    name: str
    state: str
    wchan: str


class RankView(View, frozen=True):
    anchor: str
    title: str
    host: str
    pid: int
    rank: Optional[int]
    suspect: bool
    suspect_reason: str
    status: str
    facts: Tuple[Tuple[str, str], ...]
    threads: Tuple[ThreadRow, ...]
    threads_note: str
    py_threads: Tuple[PyThreadView, ...]
    native: Tuple[NativeGroup, ...]
    native_count: int
    main_stack_anchor: str = ""
    phase: Optional[PhaseView] = None
    badge: str = ""  # shown in the collapsed header instead of the status


class FrameView(View, frozen=True):
    name: str
    where: str


class StackView(View, frozen=True):
    anchor: str
    label: str
    frames: Tuple[FrameView, ...]
    used_by: str


# The columns of that line, in order: the terminal summary and the Markdown table show the same.
RANK_COLUMNS: Tuple[str, ...] = (
    "process",
    "role",
    "pid",
    "status",
    "state",
    "CPU",
    "RSS",
    "threads",
    "sig",
    "main thread",
)


class RankSummary(View, frozen=True):
    """One line per process for the terminal summary and the Markdown table."""

    label: str
    anchor: str
    pid: int
    host: str
    status: str
    state: str
    cpu_pct: str
    rss: str
    threads: int
    signature: str
    top: str
    suspect: bool
    badge: str = ""  # shown instead of the status
    # The part it plays: scheduler, detokenizer, engine core, worker, API server (its
    # framework's title or command line), else diag's launcher / rank / worker / helper.
    role: str = ""


class ReportView(View, frozen=True):
    meta: Meta
    banner: Banner
    evidence: Tuple[EvidenceView, ...]
    timelines: Timelines
    matrix: Matrix
    ranks: Tuple[RankView, ...]
    rank_table: Tuple[RankSummary, ...]
    stacks: Tuple[StackView, ...]
    futex_groups: Tuple[FutexGroup, ...]
    futex_note: str
    gpu: Gpu
    env_common: Tuple[EnvRow, ...]
    env_diffs: Tuple[EnvDiff, ...]
    host_facts: Tuple[Tuple[str, str], ...]
    commands: Tuple[ProcCommand, ...]
    logs: Tuple[LogView, ...]
    failures: Tuple[FailureRow, ...]
    failures_more: int
    timings: Tuple[TimingRow, ...]
    collectives: Tuple[CollectiveRow, ...] = ()
    ras: Tuple[RasRow, ...] = ()
    nccl_logs: Tuple[NcclLogRow, ...] = ()
    hosts: Tuple[HostRow, ...] = ()
    graph: Optional[GraphView] = None  # who waits on whom (the verdict's wait-for graph)
    # Who the ranks wait for: per-rank "waits for others" bars (diag.render.stragglers).
    stragglers: Optional[StragglersView] = None
    # What bounded each process's CPU: its cgroup's limit, throttling, run-queue delay, nice
    # (diag.render.machine); None for a bundle written before they were read.
    machine: Optional[MachineView] = None


__all__ = [
    "Banner",
    "ClassView",
    "CollectiveRow",
    "EnvDiff",
    "EnvRow",
    "EvidenceView",
    "FailureRow",
    "FrameView",
    "FutexGroup",
    "Gpu",
    "GpuRow",
    "GraphArrow",
    "GraphBox",
    "GraphView",
    "HostRow",
    "LegendEntry",
    "LogView",
    "MachineRow",
    "MachineView",
    "Matrix",
    "MatrixCell",
    "MatrixRow",
    "Meta",
    "NativeGroup",
    "NcclLogRow",
    "PhaseView",
    "ProcCommand",
    "PyThreadView",
    "RankSummary",
    "RankView",
    "RasRow",
    "ReportView",
    "Spark",
    "StackRun",
    "StackView",
    "StragglerRow",
    "StragglersView",
    "SuspectView",
    "ThreadRow",
    "TimelineGroup",
    "TimelineRow",
    "Timelines",
    "TimingRow",
    "View",
]
