"""View records of the report's reference tables: futex groups, GPUs, collectives, env, logs.

Split from view.py only to keep each module short; import them from ``diag.render.view``.
"""

from __future__ import annotations

from typing import Tuple

from diag.render.view_base import Spark, View


class FutexGroup(View, frozen=True):
    label: str
    anchor: str
    addr: str
    owner: str
    owner_anchor: str
    waiters: int
    threads: str
    op: str
    samples_seen: int


class EnvRow(View, frozen=True):
    name: str
    value: str


class EnvDiff(View, frozen=True):
    label: str
    rows: Tuple[EnvRow, ...]


class ProcCommand(View, frozen=True):
    label: str
    command: str


class LogView(View, frozen=True):
    path: str
    exists: bool
    lines: int
    lines_exact: bool
    size: str
    growth: str
    spark: Spark
    head: Tuple[str, ...]
    tail: Tuple[str, ...]
    skipped_lines: int


class FailureRow(View, frozen=True):
    sample: str
    probe: str
    target: str
    reason: str
    duration: str


class TimingRow(View, frozen=True):
    probe: str
    mean_ms: str
    max_ms: str
    count: int


class GpuRow(View, frozen=True):
    index: int
    name: str
    util: str
    mem: str
    power: str
    temp: str
    pids: str
    util_spark: Spark
    power_spark: Spark


class Gpu(View, frozen=True):
    available: bool
    note: str
    rows: Tuple[GpuRow, ...] = ()


class CollectiveRow(View, frozen=True):
    who: str
    anchor: str
    pg: str
    enqueued: str
    started: str
    completed: str
    behind: int
    last_op: str
    source: str


class NcclLogRow(View, frozen=True):
    who: str
    anchor: str
    kind: str
    count: int
    last_line: str
    when: str
    seqs: str


class RasRow(View, frozen=True):
    comm: str
    size: int
    missing: str
    dead: str
    launched: str


class HostRow(View, frozen=True):
    name: str
    status: str
    clock_offset: str
    start_offset: str
    samples: int
    dropped: int
    complete: bool
