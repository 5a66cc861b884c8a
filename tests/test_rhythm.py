"""Silence judged against the job's own rhythm (issue #37, ``diag.verdict.rhythm``): the beat
read from a log's timestamped tail, when a capture is too short to call a hang, how many
samples cover it, and the capture that extends itself to see the next line."""

from __future__ import annotations

from typing import List, Sequence

from diag.model import LogSample, Sample
from diag.verdict.rhythm import (
    MAX_EXTEND_S,
    extension_end,
    grew_since,
    hedge_text,
    line_stamp,
    period_of,
    undecided,
)

T0 = 1_796_500_000.0


def _lines(times: Sequence[float], burst: int = 1) -> List[str]:
    out = []
    for i, t in enumerate(times):
        whole, frac = divmod(t, 1)
        m, s = divmod(int(whole) + 1800, 60)
        for j in range(burst):
            out.append(f"2026-12-06 04:{m:02d}:{s:02d},{int(frac * 1000):03d} step {i} part {j}")
    return out


def test_a_line_stamp_is_read_from_the_iso_time_it_starts_with() -> None:
    a = line_stamp("2026-12-06 04:37:24,726 step 1 done")
    b = line_stamp("[2026-12-06T04:37:36.751] step 2")
    assert a is not None and b is not None and abs(b - a - 12.025) < 1e-6
    assert line_stamp("step 3 done") is None


def test_the_beat_is_the_median_gap_between_bursts() -> None:
    assert period_of(_lines([0, 12, 24, 36])) == (12.0, 3)
    # A step's several lines printed at once are one beat.
    assert period_of(_lines([0, 12, 24, 36], burst=3)) == (12.0, 3)


def test_no_beat_from_too_few_lines_a_start_up_or_a_fast_log() -> None:
    assert period_of(_lines([0, 12, 24])) is None  # two gaps: not yet a beat
    assert period_of(_lines([0, 1.5, 30, 31.5])) is None  # start-up lines, no steady beat
    assert period_of(_lines([0, 1.2, 2.4, 3.6, 4.8])) is None  # any capture covers it


def _log(size: int, mtime: float, tail: Sequence[str], path: str = "/job/train.log") -> LogSample:
    return LogSample(path=path, size_bytes=size, mtime_s=mtime, tail=tuple(tail), inode=7)


def _samples(start: float, n: int, gap: float, last_line: float) -> List[Sample]:
    tail = _lines([last_line - 36, last_line - 24, last_line - 12, last_line])
    return [
        Sample(index=i, t_s=start + i * gap, logs=(_log(100, T0 + last_line, tail),))
        for i in range(n)
    ]


def test_a_capture_shorter_than_the_beat_is_undecided_until_the_log_is_overdue() -> None:
    # The last line 2 s before a 4 s capture: quiet for 6 s of a 12 s beat.
    r = undecided(_samples(T0 + 2, 3, 2.0, 0))
    assert r is not None and r.period_s == 12 and round(r.quiet_s) == 6 and round(r.span_s) == 4
    assert round(r.decide_s) == 16  # the next line is late 18 s after the last one
    assert extension_end(_samples(T0 + 2, 3, 2.0, 0)) == ("/job/train.log", T0 + 2 + 16)
    text = hedge_text(r, "deadlocked: rank 2 diverged")
    assert text.startswith("too short to call a hang - train.log has had a line every ")
    assert "a capture of at least 16 s decides (diag capture --count 9 --interval 2" in text
    assert text.endswith("without its rhythm it reads: deadlocked: rank 2 diverged")
    # Quiet for 1.5 beats: overdue, the capture may call it.
    assert undecided(_samples(T0 + 15, 3, 2.0, 0)) is None
    assert extension_end(_samples(T0 + 15, 3, 2.0, 0)) is None


def test_the_extension_is_bounded() -> None:
    tail = _lines([0, 300, 600, 900])  # a line every 5 min
    samples = [
        Sample(index=i, t_s=T0 + 901 + 2 * i, logs=(_log(9, T0 + 900, tail),)) for i in (0, 1, 2)
    ]
    assert undecided(samples) is not None
    assert extension_end(samples) == ("/job/train.log", samples[-1].t_s + MAX_EXTEND_S)


def test_a_log_that_grew_during_the_capture_is_judged_elsewhere() -> None:
    samples = _samples(T0 + 2, 3, 2.0, 0)
    grown = samples[-1].logs[0]
    last = Sample(index=3, t_s=T0 + 8, logs=(LogSample(**{**_fields(grown), "size_bytes": 140}),))
    assert undecided([*samples, last]) is None
    assert grew_since(samples[0], last, "/job/train.log")
    assert not grew_since(samples[0], samples[-1], "/job/train.log")
    assert not grew_since(samples[0], last, "/job/other.log")


def _fields(lg: LogSample) -> dict:  # type: ignore[type-arg]
    return {f: getattr(lg, f) for f in lg.__struct_fields__}


class _LateCollector:
    """Samples whose clock the test sets: the planned three run late (5-6 s apart on a
    loaded host), the extra ones come back to back (1 s apart)."""

    def __init__(self, times: Sequence[float], log_grows_at: int = -1) -> None:
        self.times = list(times)
        self.log_grows_at = log_grows_at
        self.tail = _lines([-36, -24, -12, 0])

    def take_sample(self, index: int, late_s: float = 0.0, lean: bool = False) -> object:
        size = 140 if 0 <= self.log_grows_at <= index else 100
        sample = Sample(index=index, t_s=self.times[index], logs=(_log(size, T0, self.tail),))
        return type("Delta", (), {"sample": sample})()


def _record(collector: _LateCollector) -> object:
    from diag.commands.capture import _Recorder

    recorder = _Recorder(collector, None, (3, 2.0))  # type: ignore[arg-type]
    for i in range(len(collector.times)):
        if recorder.take(i, 0.0, False, False):
            break
    return recorder


def test_a_late_capture_extends_to_the_time_that_decides_not_a_number_of_samples() -> None:
    # The last line at T0, a 12 s beat: overdue at T0 + 18. The planned samples end at
    # T0 + 11 (late); the extra ones, back to back, must go on until T0 + 18 - six of them,
    # where a count of (18 - 11) / 2 = 4 samples ended at T0 + 15, still "too short".
    times = [T0 + 0.5, T0 + 5, T0 + 11, *(T0 + 11 + k for k in range(1, 30))]
    recorder = _record(_LateCollector(times))
    last = recorder.samples[-1]  # type: ignore[attr-defined]
    assert last.t_s == T0 + 18 and recorder.extended_by == 7  # type: ignore[attr-defined]
    assert undecided(recorder.samples) is None  # type: ignore[attr-defined]


def test_the_extension_ends_at_the_next_line() -> None:
    times = [T0 + 0.5, T0 + 5, T0 + 11, *(T0 + 11 + k for k in range(1, 30))]
    recorder = _record(_LateCollector(times, log_grows_at=5))
    assert len(recorder.samples) == 6 and recorder.extended_by == 3  # type: ignore[attr-defined]
