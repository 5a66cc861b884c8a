"""What a sampling round's per-process reads become: stack outcomes (with the dumps kept for
reuse) and, for reads done by workers, the same records the Collector's own probes give.

Kept apart from ``diag.collect.collector`` so that the Collector reads as the order of a round,
and the bookkeeping of a read - reused or not, failed or not, in which record - lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from diag.collect.process_work import ProcessResult, StackRead
from diag.model import Frame, ProbeFailure, ProcessSample
from diag.probes.quiescence import Fingerprint
from diag.probes.stacks import (
    KIND_ERROR,
    KIND_GONE,
    KIND_NOT_PYTHON,
    KIND_ZOMBIE,
    PyThreadDump,
    StackError,
)

# Failures of these kinds say what the process is (not Python, gone), not that a probe failed.
QUIET_KINDS = (KIND_NOT_PYTHON, KIND_ZOMBIE, KIND_GONE)


class StackOutcome(NamedTuple):
    # Each dump's frames are in ``frames`` under its ``stack_id`` (as a worker sends them:
    # rebuilding every dump with its frames was ~1,000 struct copies a sample at 8 ranks).
    dumps: Optional[List[PyThreadDump]]
    error: Optional[StackError]
    reused: bool = False
    reader: Optional[str] = None
    truncated: Optional[str] = None  # what the read's budgets cut ("truncated: ...")
    frames: Mapping[str, Tuple[Frame, ...]] = {}


class QuietDump(NamedTuple):
    """A dump and the run counters read just before it (no thread was running then)."""

    fingerprint: Fingerprint
    dumps: List[PyThreadDump]
    reader: str
    frames: Mapping[str, Tuple[Frame, ...]]


class StackBook:
    """The dumps that may be reused, by pid, and how a stack read becomes an outcome."""

    def __init__(self) -> None:
        self._quiet: Dict[int, QuietDump] = {}

    def key(self, pid: int) -> Optional[Fingerprint]:
        """The counters a read of ``pid`` must still find to reuse its last dump."""
        quiet = self._quiet.get(pid)
        return quiet.fingerprint if quiet is not None else None

    def absorb(self, pid: int, read: StackRead) -> StackOutcome:
        """A stack read (here or in a worker) as an outcome; keeps a dump offered for reuse."""
        quiet = self._quiet.pop(pid, None)
        if read.reused and quiet is not None:
            self._quiet[pid] = quiet
            return StackOutcome(
                quiet.dumps, None, reused=True, reader=quiet.reader, frames=quiet.frames
            )
        dumps = read.dumps
        if dumps is None:
            kind = read.error_kind or KIND_ERROR
            return StackOutcome(None, StackError(kind, read.error or "no stacks were read"))
        if read.quiet is not None:
            self._quiet[pid] = QuietDump(read.quiet, dumps, read.reader or "", read.stacks)
        return StackOutcome(
            dumps, None, reader=read.reader, truncated=read.truncated, frames=read.stacks
        )


@dataclass
class RoundRecords:
    """The records a round collects before its samples are assembled."""

    host: str
    index: int
    procs: Dict[int, ProcessSample] = field(default_factory=dict)
    outcomes: Dict[int, StackOutcome] = field(default_factory=dict)
    failures: List[ProbeFailure] = field(default_factory=list)
    timings: Dict[str, float] = field(default_factory=dict)
    stack_errors: Dict[int, str] = field(default_factory=dict)

    def fail(self, probe: str, reason: str, pid: Optional[int], took_s: float = 0.0) -> None:
        self.failures.append(
            ProbeFailure(
                probe=probe,
                reason=reason,
                duration_s=round(took_s, 4),
                pid=pid,
                host=self.host,
                sample=self.index,
            )
        )

    def time(self, probe: str, took_s: float) -> None:
        self.timings[probe] = max(self.timings.get(probe, 0.0), round(took_s, 4))

    def stack_outcome(self, pid: int, outcome: StackOutcome, took_s: float) -> None:
        """Record an outcome; a failed read is a failure record unless it says what the
        process is (not Python, gone)."""
        self.outcomes[pid] = outcome
        if outcome.error is not None:
            self.stack_errors[pid] = outcome.error.kind
            if outcome.error.kind not in QUIET_KINDS:
                self.fail("stacks", str(outcome.error), pid, took_s)
        elif outcome.truncated is not None and not outcome.reused:
            self.fail("stacks", outcome.truncated, pid, took_s)

    def from_workers(
        self,
        value: Tuple[Dict[int, ProcessResult], Dict[int, str]],
        known: Mapping[int, object],
        book: StackBook,
        exit_codes: Dict[int, Optional[int]],
    ) -> None:
        """The workers' results as if each process's probes had run here (same records).
        Work was posted before discovery: a process not in ``known`` is dropped."""
        results, missing = value
        for pid, why in missing.items():
            if pid in known:
                self.fail("proc", why, pid)
        for pid, result in results.items():
            if pid not in known:
                continue
            self.time("proc", result.proc_s)
            if result.proc_error is not None:
                self.fail("proc", result.proc_error, pid, result.proc_s)
            if result.native_note is not None:
                self.fail("native", result.native_note, pid)
            if result.sample is not None:
                self.procs[pid] = result.sample
                if result.sample.status == "zombie":
                    exit_codes[pid] = result.sample.exit_code
            read = result.stacks
            if read is not None:
                self.time("stacks", read.duration_s)
                self.stack_outcome(pid, book.absorb(pid, read), read.duration_s)
