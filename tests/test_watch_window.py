"""The pure parts of a watch: the bounded window, the verdict's recent span, the status line,
and the flag parsers."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

import pytest

from diag.bundle.io import load_bundle
from diag.errors import EXIT_USAGE, DiagError
from diag.model import (
    Frame,
    HostInfo,
    LogSample,
    ProcessInfo,
    ProcessSample,
    Sample,
    Stack,
    Target,
    ThreadSample,
    Verdict,
)
from diag.watch.loop import WatchOptions, run_watch
from diag.watch.session import parse_duration_s, parse_states
from diag.watch.window import SampleWindow, cpu_by_process, log_growth, status_line

HOST = HostInfo(clk_tck=100)


class Delta(NamedTuple):
    sample: Sample
    new_processes: Tuple[ProcessInfo, ...] = ()
    new_stacks: Dict[str, Stack] = {}


def proc(pid: int, t_s: float, ticks: int, stack_id: str = "s0") -> ProcessSample:
    thread = ThreadSample(tid=pid, stack_id=stack_id)
    return ProcessSample(pid=pid, t_s=t_s, utime_ticks=ticks, threads=(thread,))


def sample(index: int, *procs: ProcessSample, lines: int = 0, inode: int = 1) -> Sample:
    log = LogSample(path="/x.log", lines=lines, size_bytes=lines * 10, inode=inode)
    return Sample(index=index, t_s=float(index), processes=procs, logs=(log,))


def test_window_keeps_the_last_samples_and_only_what_they_reference() -> None:
    window = SampleWindow(5)
    stacks = {f"s{i}": Stack(frames=(Frame(name=f"f{i}"),)) for i in range(3)}
    infos = tuple(ProcessInfo(pid=pid, rank=pid - 10) for pid in (10, 11))
    window.add(Delta(sample(0, proc(10, 0, 0, "s0"), proc(11, 0, 0, "s1")), infos, stacks))
    for i in range(1, 50):
        window.add(Delta(sample(i, proc(10, i, i, "s2"))))
    assert [s.index for s in window.samples] == [45, 46, 47, 48, 49]
    bundle = window.bundle(HOST, Target(root_pid=10), 0.0)
    assert [p.pid for p in bundle.processes] == [10]  # pid 11 left the window
    assert set(bundle.stacks) == {"s2"}
    # A stack that reappears later still resolves: interned records are kept, not re-sent.
    window.add(Delta(sample(50, proc(10, 50, 50, "s0"))))
    assert "s0" in window.bundle(HOST, Target(), 0.0).stacks


def test_recent_span_has_enough_samples_and_seconds() -> None:
    window = SampleWindow(60)
    for i in range(40):
        window.add(Delta(sample(i, proc(10, i, i))))  # one sample per second
    assert window.recent(3, 10.0) == 11  # 11 samples span 10 s
    assert window.recent(3, 0.0) == 3
    assert window.recent(50, 0.0) == 40  # never more than the window
    last = window.bundle(HOST, Target(), 0.0, last=3)
    assert [s.index for s in last.samples] == [37, 38, 39]


def test_status_line_has_time_verdict_cpu_and_log_growth() -> None:
    window = SampleWindow(10)
    info = (ProcessInfo(pid=10, rank=0), ProcessInfo(pid=11))
    window.add(Delta(sample(0, proc(10, 0.0, 0), proc(11, 0.0, 0), lines=5), info))
    window.add(Delta(sample(1, proc(10, 2.0, 200), proc(11, 2.0, 20), lines=8)))
    line = status_line(window, Verdict(state="progressing"), clk_tck=100)
    assert " #1 progressing | cpu r0 100% pid11 10% | log +3 lines +30 B" in line
    quiet = SampleWindow(10)
    quiet.add(Delta(sample(0, proc(10, 0.0, 0), lines=5)))
    quiet.add(Delta(sample(1, proc(10, 1.0, 0), lines=5)))
    assert "log quiet" in status_line(quiet, Verdict(state="idle"), 100)
    ended = status_line(quiet, Verdict(state="exited"), 100, child_exit_code=-9, launched=True)
    assert ended.endswith("command ended: killed by SIGKILL")


def test_rates_ignore_rotated_logs_and_vanished_processes() -> None:
    before = sample(0, proc(10, 0.0, 0), proc(11, 0.0, 0), lines=100, inode=1)
    after = sample(1, proc(10, 1.0, 50), lines=3, inode=2)
    assert log_growth(before, after) == (0, 0)
    assert cpu_by_process(before, after, 100, {}) == [("pid10", 50.0)]


def test_flag_parsers() -> None:
    assert parse_duration_s("90") == 90.0
    assert parse_duration_s("15m") == 900.0
    assert parse_duration_s("2h") == 7200.0
    assert parse_duration_s("1d") == 86400.0
    assert parse_states("deadlocked, idle") == frozenset({"deadlocked", "idle"})
    assert parse_states(None) == frozenset()
    for bad in ("soon", "-5s", "0"):
        with pytest.raises(DiagError) as info:
            parse_duration_s(bad)
        assert info.value.exit_code == EXIT_USAGE
    with pytest.raises(DiagError) as info:
        parse_states("deadlocked,hung")
    assert "hung" in info.value.message and info.value.exit_code == EXIT_USAGE


class SeriesSource:
    """Replays samples as a collector would hand them out: the loop's counting is pure logic,
    so it is tested on data; the real collector is exercised in test_watch.py."""

    def __init__(self, n: int) -> None:
        self.samples = [sample(i, proc(10, float(i), i)) for i in range(n)]
        self.target = Target(root_pid=10)

    def host_info(self) -> HostInfo:
        return HOST

    def take_sample(self, index: int, *, late_s: float = 0.0, lean: bool = False) -> Delta:
        new = (ProcessInfo(pid=10),) if index == 0 else ()
        return Delta(self.samples[index], new)

    def alive(self) -> bool:
        return True


def test_fail_on_counts_only_verdicts_judged_on_enough_samples(tmp_path: Path) -> None:
    reports: List[Tuple[int, bool]] = []
    options = WatchOptions(
        journal_path=tmp_path / "w.jsonl",
        interval_s=0.0,
        count=10,
        fail_on=frozenset({"idle"}),
        fail_after=1,
        verdict_min_span_s=0.0,
    )
    result = run_watch(
        SeriesSource(10),
        options,
        writer=lambda bundle, final: reports.append((len(bundle.samples), final)),
        classify=lambda bundle: Verdict(state="idle"),
        echo=lambda line: None,
    )
    assert result.fail_on_hit
    assert result.samples == 3  # not 1: one or two samples cannot judge idleness
    assert reports[-1] == (3, True)  # the final report was written, with every sample
    journal = load_bundle(tmp_path / "w.jsonl")
    assert journal.complete and len(journal.samples) == 3
    assert journal.verdict is not None and journal.verdict.state == "idle"


def test_live_report_is_rewritten_on_a_new_verdict_or_after_report_every_s(
    tmp_path: Path,
) -> None:
    """A 1-second watch must not spend its time re-rendering: the live report waits for a
    changed verdict or ``report_every_s``; the final one is always written."""
    reports: List[Tuple[int, bool]] = []
    states = iter(["idle"] * 4 + ["deadlocked"] * 6)
    options = WatchOptions(interval_s=0.0, count=10, report_every_s=3600.0)
    result = run_watch(
        SeriesSource(10),
        options,
        writer=lambda bundle, final: reports.append((len(bundle.samples), final)),
        classify=lambda bundle: Verdict(state=next(states)),
        echo=lambda line: None,
    )
    assert result.samples == 10
    # After sample 1 (the first), sample 5 (the verdict changed), and the final report.
    assert reports == [(1, False), (5, False), (10, True)]

    reports.clear()
    every = WatchOptions(interval_s=0.0, count=4, report_every_s=0.0)
    run_watch(
        SeriesSource(4),
        every,
        writer=lambda bundle, final: reports.append((len(bundle.samples), final)),
        classify=lambda bundle: Verdict(state="idle"),
        echo=lambda line: None,
    )
    assert reports == [(1, False), (2, False), (3, False), (4, True)]


def _stopped(index: int, t_s: float, read_at_s: float, ran_at_s: float) -> Sample:
    """Pid 10 stopped at ``ran_at_s``, read ``read_at_s`` (late, on a loaded host)."""
    main = ThreadSample(tid=10, state="T", off_cpu_s=round(read_at_s - ran_at_s, 3))
    ps = ProcessSample(pid=10, t_s=read_at_s, state="T", threads=(main,))
    return Sample(index=index, t_s=t_s, processes=(ps,))


def test_quiet_tail_counts_back_from_when_the_process_was_read() -> None:
    """A job stopped at 3.1 s, sampled every 0.5 s: the quiet tail is the samples taken since.
    A late read (the process read 0.45 s into its sample, as on a loaded host) must not take
    in the sample before the stop - its log growth read "progressing" again (the flap)."""
    window = SampleWindow(60)
    for i in range(7):  # 0.0 .. 3.0 s: running
        running = ThreadSample(tid=10, state="S", off_cpu_s=0.01)
        ps = ProcessSample(pid=10, t_s=i * 0.5, threads=(running,))
        window.add(Delta(Sample(index=i, t_s=i * 0.5, processes=(ps,))))
    window.add(Delta(_stopped(7, 3.5, 3.51, 3.1)))
    window.add(Delta(_stopped(8, 4.0, 4.01, 3.1)))
    assert window.quiet_tail() == 2  # samples 7 and 8
    window.add(Delta(_stopped(9, 4.5, 4.95, 3.1)))  # read 0.45 s late
    assert window.quiet_tail() == 3  # samples 7-9, not sample 6 (3.0 s, before the stop)
    assert [s.index for s in list(window.samples)[-window.quiet_tail() :]] == [7, 8, 9]
