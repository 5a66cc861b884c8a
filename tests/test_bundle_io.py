"""The bundle formats: whole-document JSON, and the crash-safe, delta-encoded journal."""

from __future__ import annotations

from pathlib import Path
from typing import List

import msgspec
import pytest

from bench.synth import make_bundle
from diag.bundle import outdir
from diag.bundle.io import JournalWriter, load_bundle, write_bundle
from diag.errors import EXIT_BAD_BUNDLE, EXIT_DISK_FULL, DiagError
from diag.model import SCHEMA_VERSION, Bundle, ProcessSample, Sample, ThreadSample


def _journal(path: Path, bundle: Bundle, end: bool = True) -> None:
    writer = JournalWriter(path)
    writer.header(bundle.host, bundle.target, bundle.created_s, bundle.failures)
    for i, sample in enumerate(bundle.samples):
        writer.sample(sample, bundle.processes if i == 0 else (), bundle.stacks if i == 0 else {})
    if end:
        writer.end(bundle.target, bundle.verdict)
    writer.close()


def test_json_round_trip(tmp_path: Path) -> None:
    bundle = make_bundle(ranks=2, threads=4, samples=3)
    write_bundle(bundle, tmp_path / "b.json")
    assert load_bundle(tmp_path / "b.json") == bundle


def test_journal_rebuilds_every_sample_exactly(tmp_path: Path) -> None:
    bundle = make_bundle(ranks=4, threads=16, samples=40)
    _journal(tmp_path / "w.jsonl", bundle)
    loaded = load_bundle(tmp_path / "w.jsonl")
    assert loaded.complete
    assert loaded.samples == bundle.samples
    assert loaded.stacks == bundle.stacks
    assert loaded.verdict == bundle.verdict


def test_journal_leaves_out_unchanged_threads(tmp_path: Path) -> None:
    """A stuck job's blocked threads repeat every sample: the journal writes them once."""
    base = make_bundle(ranks=8, threads=60, samples=1)
    stuck = tuple(
        msgspec.structs.replace(base.samples[0], index=i, t_s=base.samples[0].t_s + 30 * i)
        for i in range(60)
    )
    bundle = msgspec.structs.replace(base, samples=stuck)
    _journal(tmp_path / "w.jsonl", bundle)
    full = sum(len(msgspec.json.encode(s)) for s in bundle.samples)
    assert (tmp_path / "w.jsonl").stat().st_size < full / 8
    assert load_bundle(tmp_path / "w.jsonl").samples == bundle.samples


def _sample(index: int, tids: List[int], ticks: int) -> Sample:
    threads = tuple(ThreadSample(tid=t, utime_ticks=ticks if t == tids[0] else 1) for t in tids)
    proc = ProcessSample(pid=tids[0], threads=threads)
    return Sample(index=index, t_s=float(index), processes=(proc,))


def test_threads_out_of_order_and_coming_and_going(tmp_path: Path) -> None:
    samples = [
        _sample(0, [10, 11, 12], 1),
        _sample(1, [10, 11, 12, -1], 2),  # a Python thread /proc did not list
        _sample(2, [10, 12, 13], 3),  # 11 ended, 13 started
        _sample(3, [10, 13, 12], 4),  # not in the collector's order: written in full
        _sample(4, [10, 12, 13], 4),  # nothing changed at all
    ]
    bundle = Bundle(samples=tuple(samples))
    _journal(tmp_path / "o.jsonl", bundle)
    assert load_bundle(tmp_path / "o.jsonl").samples == bundle.samples


def test_torn_last_line_keeps_every_complete_sample(tmp_path: Path) -> None:
    bundle = make_bundle(ranks=2, threads=8, samples=5)
    path = tmp_path / "k.jsonl"
    _journal(path, bundle, end=False)
    with open(path, "ab") as fh:
        fh.write(b'{"kind":"sample","sample":{"index":5,"t_s"')  # SIGKILL mid-write
    loaded = load_bundle(path)
    assert not loaded.complete
    assert loaded.samples == bundle.samples


def test_a_line_refused_by_a_full_disk_is_retried_whole_and_close_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #25: the failed line stays queued (the next lines' deltas build on it), the half
    of it that reached the disk is cut away, and ``close`` does not raise over the error."""
    path = tmp_path / "d.jsonl"
    writer = JournalWriter(path)
    bundle = make_bundle(ranks=2, threads=8, samples=3)
    writer.header(bundle.host, bundle.target, 0.0)
    writer.sample(bundle.samples[0], bundle.processes, bundle.stacks)
    real_write_all = outdir.write_all

    def full_disk(fd: int, data: bytes) -> None:
        real_write_all(fd, data[: len(data) // 2])  # a torn line on disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outdir, "write_all", full_disk)
    with pytest.raises(DiagError) as info:
        writer.sample(bundle.samples[1])
    assert info.value.exit_code == EXIT_DISK_FULL
    writer.sample(bundle.samples[2])  # backing off: queued, not tried, not raised
    monkeypatch.setattr(outdir, "write_all", real_write_all)
    writer.close()
    assert writer.complete and writer.failure is not None
    loaded = load_bundle(path)
    assert loaded.complete is False  # no end line was written: but no line is torn
    assert loaded.samples == bundle.samples


def test_journal_close_reports_a_disk_that_stays_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = JournalWriter(tmp_path / "d.jsonl")
    bundle = make_bundle(ranks=1, threads=2, samples=1)

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outdir, "write_all", full_disk)
    with pytest.raises(DiagError):
        writer.header(bundle.host, bundle.target, 0.0)
    writer.close()  # one last try, which fails too: recorded, not raised
    assert not writer.complete and writer.failure is not None
    assert writer.failure.exit_code == EXIT_DISK_FULL


@pytest.mark.parametrize(
    "content,why",
    [
        (b"not json at all", "not JSON"),
        (b'{"hello": 1}', "no schema_version"),
        (b'{"schema_version": %d}' % (SCHEMA_VERSION + 1), "newer"),
    ],
)
def test_unreadable_bundles_say_so(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(DiagError) as info:
        load_bundle(path)
    assert info.value.exit_code == EXIT_BAD_BUNDLE
    assert why in info.value.one_line()
