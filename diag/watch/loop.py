"""``diag watch``: sample until stopped, keep the report current, journal every sample.

Memory and cost stay bounded over a day at 30 s (2,880 samples) by three decisions:

* **Journal, not memory, holds the series.** Each sample is appended to ``PATH.jsonl``
  (flushed + fsynced: a SIGKILL loses at most the sample in flight) and then dropped, except
  for the last ``window_samples`` kept in a ``SampleWindow``. ``diag report PATH.jsonl``
  renders the whole series from the journal at any time.
* **The report shows the window; the verdict judges its recent end.** The live report is
  rendered from the last ``window_samples`` (30 minutes at the default 30 s), so re-rendering
  after every sample costs the same at sample 10 and at sample 2,880; the final report too.
  The classifier (a pure function of a series) sees only the trailing samples that are at least
  ``verdict_min_samples`` and ``verdict_min_span_s`` long: a verdict "so far" must say what the
  job does *now* (25 minutes of progress followed by a hang is deadlocked, not progressing),
  and ``--fail-after`` consecutive samples absorbs the flapping a short view allows.
* **Interned records are kept, not repeated.** The collector sends each stack and each
  process's identity once; the window keeps every stack/ProcessInfo it was sent (bounded by
  the program's distinct code paths and process churn, not by time), and a rendered bundle
  carries only those the window's samples reference.

Stopping: SIGINT/SIGTERM (forwarded to a launched child first, see ``diag.watch.launch``), the
target exiting, ``--count``/``--duration``, or ``--fail-on`` holding for ``fail_after``
consecutive samples. Every path ends the same way: one last sample when the stop came from
outside, the journal's ``end`` line, and the final report.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import (
    Callable,
    FrozenSet,
    List,
    Optional,
    Tuple,
)

import msgspec

from diag.bundle.io import JournalWriter
from diag.bundle.outdir import OutputDir
from diag.commands.sampling import Hooks, SeriesOptions, run_series
from diag.commands.schedule import Schedule
from diag.errors import DiagError
from diag.model import Bundle, Target, Verdict, VerdictChange
from diag.model.judged import HISTORY_SUMMARY_CHARS, MAX_HISTORY
from diag.text.terminal import safe_line
from diag.watch.faults import WriteFaults
from diag.watch.interrupts import StopRequest
from diag.watch.launch import LaunchedCommand
from diag.watch.window import SampleSource, SampleWindow, status_line

DEFAULT_WINDOW_SAMPLES = 60
DEFAULT_STOP_GRACE_S = 10.0


ReportWriter = Callable[[Bundle, bool], None]  # (bundle, final) -> writes HTML/MD atomically
Classifier = Callable[[Bundle], Verdict]


class WatchOptions(msgspec.Struct, frozen=True, kw_only=True):
    journal_path: Optional[Path] = None  # None: no journal (a launched capture)
    interval_s: float = 30.0
    count: Optional[int] = None
    duration_s: Optional[float] = None
    fail_on: FrozenSet[str] = frozenset()
    fail_after: int = 2
    window_samples: int = DEFAULT_WINDOW_SAMPLES
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    # The verdict judges the recent past, not the whole window: a job that progressed for 25
    # minutes and then hung must read "deadlocked" now. Like a capture (3 samples over 4 s),
    # but at least 10 s, so a log that pauses between bursts is not called idle at once.
    verdict_min_samples: int = 3
    verdict_min_span_s: float = 10.0
    # The live report (HTML, Markdown, JSON) is rewritten after a sample when the verdict
    # changed or this long after its last rewrite: rendering and scrubbing it was ~60 % of a
    # 1-second watch's CPU. The journal gets every sample; the final report is always written.
    report_every_s: float = 10.0


class WatchResult(msgspec.Struct, kw_only=True):
    samples: int = 0
    verdict: Optional[Verdict] = None
    fail_on_hit: bool = False
    consecutive: int = 0
    stop_signal: Optional[int] = None
    child_exit_code: Optional[int] = None
    target: Target = Target()
    # The first failure of diag itself (a write, a bug) recorded while the watch went on; the
    # caller raises it after the summary (see ``diag.watch.faults``).
    failure: Optional[BaseException] = None


class _Loop:
    """One watch: the state that lives between samples (kept small on purpose)."""

    def __init__(
        self,
        source: SampleSource,
        options: WatchOptions,
        writer: ReportWriter,
        classify: Classifier,
        echo: Callable[[str], None],
        launched: Optional[LaunchedCommand],
        command: Tuple[str, ...],
        stop: StopRequest,
        enrich: Callable[[Bundle], Bundle] = lambda bundle: bundle,
    ) -> None:
        self.source = source
        self.enrich = enrich  # adds what is read per bundle, not per sample (FR dumps)
        self.options = options
        self.writer = writer
        self.classify = classify
        self.echo = echo
        self.launched = launched
        self.command = command
        self.stop = stop
        self.window = SampleWindow(options.window_samples)
        self.schedule = Schedule(options.interval_s, options.count or 0)  # capture's clock too
        self.host = source.host_info()
        self.created_s = time.time()
        self.result = WatchResult()
        self.journal: Optional[JournalWriter] = None
        self.ended_seen = False
        self.faults = WriteFaults(echo, launched is not None)
        self.broken = False  # sampling itself failed: only waiting for a launched child is left
        self.scrub_line: Callable[[str], str] = lambda line: line
        self.on_waiting: Callable[[], None] = lambda: None
        self._reported: Optional[Tuple[float, Optional[str]]] = None  # (when, verdict state)
        self.history: List[VerdictChange] = []  # the verdict's changes, for the monitor

    def target(self) -> Target:
        target = self.source.target
        if self.launched is None:
            return target
        return msgspec.structs.replace(
            target,
            command=self.command,
            launched=True,
            exit_code=self.launched.exit_code,
        )

    def current(self) -> Bundle:
        bundle = self.enrich(self.window.bundle(self.host, self.target(), self.created_s))
        return msgspec.structs.replace(
            bundle, verdict=self.result.verdict, verdict_history=tuple(self.history)
        )

    def note_change(self, t_s: float, index: int, verdict: Verdict) -> None:
        """Keep the verdict's history: a change of state opens an entry (the first entry and
        the most recent ``MAX_HISTORY`` - 1 are kept, so a day of flapping stays bounded)."""
        if self.history and self.history[-1].state == verdict.state:
            return
        self.history.append(
            VerdictChange(
                t_s=t_s,
                sample=index,
                state=verdict.state,
                rule=verdict.rule,
                summary=verdict.summary[:HISTORY_SUMMARY_CHARS],
            )
        )
        if len(self.history) > MAX_HISTORY:
            del self.history[1]

    def child_ended(self) -> bool:
        if self.launched is None or self.launched.poll() is None:
            return False
        self.launched.drain()  # the last lines it wrote belong in this sample's log tail
        return True

    def after_stop_request(self) -> None:
        """A signal asked us to stop: give a launched child (already signalled) time to end."""
        if self.launched is not None:
            self.launched.wait(self.options.stop_grace_s)

    def alive(self) -> bool:
        """``Sampler.alive``: a launched command that exited, or a target gone, ends the watch
        (after one last sample that records how)."""
        return not self.child_ended() and (self.result.samples == 0 or self.source.alive())

    def take(self, index: int, late_s: float, lean: bool, ended: bool) -> bool:
        """``Sampler.take``: journal the sample, judge the recent window, print the status
        line; True when ``--fail-on`` fired (held ``fail_after`` samples, or at the end)."""
        verdict = self.take_judged(index, late_s, lean)
        self.ended_seen = ended
        opts = self.options
        if self.result.consecutive >= opts.fail_after or (ended and verdict.state in opts.fail_on):
            self.result.fail_on_hit = True
        return self.result.fail_on_hit

    def take_judged(self, index: int, late_s: float = 0.0, lean: bool = False) -> Verdict:
        delta = self.source.take_sample(index, late_s=late_s, lean=lean)
        if self.journal is not None:
            try:  # a failing line stays queued in the journal and is retried
                self.journal.sample(
                    delta.sample, tuple(delta.new_processes), dict(delta.new_stacks)
                )
            except DiagError as exc:
                self.faults.record(exc)
        self.check_log()
        self.window.add(delta)
        last = self.window.recent(self.options.verdict_min_samples, self.options.verdict_min_span_s)
        # Since the kernel says nothing of the job ran (#33), the samples before that are the
        # past: judge those taken since (two at least), so a hang reads as one two samples in.
        quiet = self.window.quiet_tail()
        if quiet >= 2:
            last = min(last, quiet)
        verdict = self.classify(
            self.enrich(self.window.bundle(self.host, self.target(), self.created_s, last))
        )
        # A verdict on fewer samples than the verdict needs (a command's first second: no
        # deltas yet) is shown but does not count toward --fail-on; "exited" is final and does.
        judged = last >= self.options.verdict_min_samples or verdict.state == "exited"
        if verdict.state in self.options.fail_on and judged:
            self.result.consecutive += 1
        else:
            self.result.consecutive = 0
        self.result.samples = index + 1
        self.result.verdict = verdict
        self.note_change(delta.sample.t_s, index, verdict)
        code = self.launched.exit_code if self.launched is not None else None
        line = status_line(self.window, verdict, self.host.clk_tck, code, self.launched is not None)
        line = safe_line(self.scrub_line(line))  # it names ranks and verdicts the target shaped
        try:
            self.echo(line)
        except OSError:
            pass  # the terminal went away (SIGHUP, a closed pipe): the report still gets written
        return verdict

    def check_log(self) -> None:
        """A launched command's log tee records its failures; they are told from here."""
        if self.launched is not None:
            self.faults.log_failed(str(self.launched.log_path), self.launched.log.error)

    def write_report(self, force: bool = False) -> bool:
        """Write the report of the current window; a failure is recorded and retried later."""
        return self.faults.attempt("report", lambda: self.writer(self.current(), False), force)

    def run(self) -> None:
        """Sample until a stop condition (the one loop, ``commands.sampling``); the last
        sample taken reflects how it stopped."""
        opts = self.options
        options = SeriesOptions(
            interval_s=opts.interval_s,
            count=opts.count or 0,
            duration_s=opts.duration_s,
            sample_gone=True,  # a command that exited at once: its sample records the code
            after_stop=True,
        )
        hooks = Hooks(between=self._write_live_report, on_stop=self.after_stop_request)
        run_series(self, options, self.stop, hooks, self.schedule)

    def _write_live_report(self) -> None:
        verdict = self.result.verdict
        if verdict is None:
            return
        now = time.monotonic()
        last = self._reported
        if (
            last is None
            or last[1] != verdict.state
            or now - last[0] >= self.options.report_every_s - 0.5 * self.options.interval_s
        ) and self.write_report():
            self._reported = (now, verdict.state)

    def settle_launched(self) -> None:
        """Sampling is over and a launched command may still run.

        After ``--fail-on`` fired, the evidence (report with the verdict that fired) is written
        first, then the command is terminated; the verdict stays the one that fired and the
        target records the exit code diag caused. Otherwise diag waits for the command to exit
        on its own, and one last sample records how it ended.
        """
        launched = self.launched
        if launched is None or self.ended_seen:
            return
        if self.broken:  # diag failed, the command did not: stay attached until it ends
            while launched.wait(1.0) is None:
                pass
            self.child_ended()
            return
        if self.result.fail_on_hit:
            if launched.poll() is None:
                self.write_report(force=True)
                launched.terminate(self.options.stop_grace_s)
            self.child_ended()
            return
        if launched.poll() is None:
            self.write_report(force=True)
            self.on_waiting()
            while launched.wait(1.0) is None:
                pass  # signals arriving meanwhile are forwarded by SignalForwarding
        self.child_ended()
        self.take_judged(self.result.samples)


def run_watch(
    source: SampleSource,
    options: WatchOptions,
    *,
    writer: ReportWriter,
    classify: Classifier,
    echo: Callable[[str], None],
    stop: Optional[StopRequest] = None,
    launched: Optional[LaunchedCommand] = None,
    command: Tuple[str, ...] = (),
    journal_scrub: Optional[Callable[[bytes], bytes]] = None,
    on_waiting: Callable[[], None] = lambda: None,
    enrich: Callable[[Bundle], Bundle] = lambda bundle: bundle,
    directory: Optional[OutputDir] = None,
) -> WatchResult:
    """Watch ``source`` until a stop condition; always end with the journal end and a report.

    ``command`` is the launched command line, already redacted by the caller;
    ``journal_scrub`` (Redactor.scrub_bytes) runs over every journal line; ``directory`` is
    the checked handle the journal is created in. Failures of diag's own (a write, a bug) do
    not raise: they are in ``result.failure`` (see ``diag.watch.faults``).
    """
    loop = _Loop(
        source, options, writer, classify, echo, launched, command, stop or StopRequest(), enrich
    )
    loop.on_waiting = on_waiting
    if options.journal_path is not None:
        journal_path = Path(options.journal_path)
        if directory is not None:
            directory.unlink(journal_path.name)  # a journal is one watch: never append
        else:
            journal_path.unlink(missing_ok=True)
        loop.journal = JournalWriter(journal_path, scrub=journal_scrub, directory=directory)
    if journal_scrub is not None:
        # The capture's redactor, which knows the target's secrets, scrubs the status lines too.
        scrub_bytes = journal_scrub
        loop.scrub_line = lambda line: scrub_bytes(line.encode("utf-8", "surrogateescape")).decode(
            "utf-8", "surrogateescape"
        )
    _watch_to_end(loop)
    result = loop.result
    result.stop_signal = loop.stop.signum
    result.child_exit_code = launched.exit_code if launched is not None else None
    result.target = loop.target()
    loop.faults.attempt("report", lambda: writer(loop.current(), True), force=True)
    loop.check_log()
    result.failure = loop.faults.first
    return result


def _watch_to_end(loop: _Loop) -> None:
    """Sample, settle a launched command, end and close the journal. Nothing that fails here
    ends the watch early or reaches a launched command: it is recorded in ``loop.faults``."""
    journal = loop.journal
    try:
        if journal is not None:
            journal.header(loop.host, loop.target(), loop.created_s)
    except DiagError as exc:
        loop.faults.record(exc)
    try:
        loop.run()
    except Exception as exc:
        loop.faults.record(exc)
        loop.broken = True
    try:
        loop.settle_launched()
    except Exception as exc:
        loop.faults.record(exc)
    if journal is None:
        return
    # Only a watch that ended normally gets an end line: one that crashed loads as
    # incomplete, which is what it is.
    if not loop.broken:
        try:
            target = loop.target()
            journal.end(target, loop.result.verdict, collectives=loop.current().collectives)
        except Exception as exc:
            loop.faults.record(exc)
    journal.close()  # never raises: what it could not write is in its failure
    if journal.failure is not None and not journal.complete:
        loop.faults.record(journal.failure)
